// Peer inventory streams and the global index, with real etcd and real
// managers: all-to-all visibility, fences, atomic install of a large snapshot,
// journal overflow repaired for one owner only, members that leave, a peer
// that sends a malformed snapshot, and puts sharing delta batches.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <random>
#include <thread>

#include "cluster_util.h"
#include "fault_proxy.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::WaitFor;

// Puts `n` small objects named prefix0..prefix{n-1} on `m`.
void PutMany(const ManagerProcess& m, const std::string& prefix, int n) {
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string value(64, 'v');
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(prefix + std::to_string(i));
  for (int at = 0; at < n; at += 1000) {
    std::vector<PutItem> items;
    for (int i = at; i < std::min(n, at + 1000); ++i) {
      items.push_back({keys[static_cast<size_t>(i)], value.data(), value.size(), ""});
    }
    for (const Status& st : (*c)->BatchPut(items)) ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

// The ranks of the blobs /query_key lists for `key` (empty when unknown).
std::vector<uint32_t> BlobRanks(const ManagerProcess& m, const std::string& key) {
  std::vector<uint32_t> out;
  Json j = GetJson(m, "/query_key?key=" + key);
  if (!j.is_object() || !j.contains("blobs")) return out;
  for (const auto& b : j["blobs"]) out.push_back(b["rank"].get<uint32_t>());
  return out;
}

uint32_t RankOf(const ManagerProcess& m) {
  Json j = GetJson(m, "/cluster/members");
  for (const auto& e : j["members"]) {
    if (e["node_id"] == j["node_id"]) return e["rank"].get<uint32_t>();
  }
  return 9999;
}

Json Coverage(const ManagerProcess& m) { return GetJson(m, "/cache/metadata"); }

// Whether m's index comes to hold exactly `n` entries (within 10 s).
bool SeesEntries(const ManagerProcess& m, int n) {
  return WaitFor([&] { return Coverage(m)["index"]["entries"] == n; });
}

// Null when the answer does not parse (see GetJson).
Json Post(const ManagerProcess& m, const std::string& path, const std::string& body) {
  Json j = Json::parse(PostText(m, path, body, 35), nullptr, false);
  return j.is_discarded() ? Json() : j;
}

TEST(Inventory, EveryManagerSeesEveryOthersObjectsWithTheOwnersRank) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  std::vector<Node> nodes;
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    nodes.push_back(StartNode(etcd.endpoints(), cluster, id));
  }
  // Zero objects anywhere: complete, empty views that prove absence.
  ASSERT_TRUE(WaitFor([&] {
    Json c = Coverage(*nodes[0].proc);
    return c["coverage"] == "complete" && c["owner_views"]["expected"] == 4;
  }));
  EXPECT_EQ(Coverage(*nodes[0].proc)["index"]["entries"], 0);
  {
    auto c0 = Client::Connect(nodes[0].proc->uds());
    ASSERT_TRUE(c0.ok());
    EXPECT_EQ((*c0)->Exist("b-k7").code(), Code::kNotFound);
  }
  for (Node& n : nodes) PutMany(*n.proc, n.id + "-k", 50);
  for (Node& viewer : nodes) {
    ASSERT_TRUE(WaitFor([&] {
      Json c = Coverage(*viewer.proc);
      return c["coverage"] == "complete" && c["owner_views"]["expected"] == 4 &&
             c["index"]["entries"] == 200;
    })) << viewer.id
        << " " << Coverage(*viewer.proc).dump();
    for (Node& owner : nodes) {
      if (&owner == &viewer) continue;
      EXPECT_EQ(BlobRanks(*viewer.proc, owner.id + "-k7"),
                std::vector<uint32_t>{RankOf(*owner.proc)})
          << viewer.id << " looking at " << owner.id;
    }
  }
  EXPECT_EQ(testing::ScrapeMetric(*nodes[0].proc, "tierkv_index_entries"), 200);
  EXPECT_EQ(testing::ScrapeMetric(*nodes[0].proc, "tierkv_index_owner_views{state=\"complete\"}"),
            4);
  // A removal on the owner reaches the others as a delta.
  auto c = Client::Connect(nodes[0].proc->uds());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Remove("a-k7").ok());
  EXPECT_TRUE(WaitFor([&] { return BlobRanks(*nodes[1].proc, "a-k7").empty(); }));
  EXPECT_EQ(BlobRanks(*nodes[1].proc, "a-k8").size(), 1u);
}

// etcd and managers a and b, b's view of a complete, and a client of a.
struct TwoManagers {
  EtcdCluster etcd{1};
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  const bool covered = WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; });
  Result<std::unique_ptr<Client>> client = Client::Connect(a.proc->uds());
  bool ready() const { return covered && client.ok(); }
};

TEST(Inventory, ASyncFenceAwaitedOnAnotherManagerMakesThePutVisibleEveryTime) {
  TwoManagers t;
  ASSERT_TRUE(t.ready());
  Client& c = **t.client;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "fenced" + std::to_string(i);
    ASSERT_TRUE(c.Put(key, "v").ok());
    Json fence = Post(*t.a.proc, "/cache/sync", "");
    ASSERT_EQ(fence["success"], true) << fence.dump();
    Json req = {{"inventory_fence", fence["inventory_fence"]},
                {"scope_digest", fence["scope_digest"]},
                {"timeout_ms", 10000}};
    Json done = Post(*t.b.proc, "/cache/metadata/await", req.dump());
    ASSERT_EQ(done["success"], true) << done.dump();
    EXPECT_EQ(BlobRanks(*t.b.proc, key).size(), 1u) << key;  // no waiting after the await
  }
  // A fence of the future times out with a clear error; a wrong scope is refused.
  Json future = {{"inventory_fence", {{"owner", "a"}, {"sequence", 1u << 30}}},
                 {"timeout_ms", 200}};
  Json late = Post(*t.b.proc, "/cache/metadata/await", future.dump());
  EXPECT_EQ(late["success"], false);
  EXPECT_NE(late["error_message"].get<std::string>().find("timeout"), std::string::npos);
  future["scope_digest"] = "0000";
  Json other = Post(*t.b.proc, "/cache/metadata/await", future.dump());
  EXPECT_NE(other["error_message"].get<std::string>().find("scope mismatch"), std::string::npos);
  EXPECT_EQ(Post(*t.b.proc, "/cache/metadata/await", "{}")["success"], false);
}

// A fence names the incarnation that took it (runtime UUID and epoch): a
// restarted owner numbers its changes anew, so the view of its next
// incarnation soon passes the old fence's sequence without holding what the
// old one stored. That view covers the new incarnation's fences, never the
// old one's.
TEST(Inventory, AFenceOfAnEarlierIncarnationIsNeverCoveredByTheNextOne) {
  TwoManagers t;
  ASSERT_TRUE(t.ready());
  PutMany(*t.a.proc, "old", 20);
  const Json old = Post(*t.a.proc, "/cache/sync", "")["inventory_fence"];
  const std::string old_uuid = old.value("runtime_uuid", "");
  ASSERT_FALSE(old_uuid.empty()) << old.dump();
  t.client = Status(Code::kUnavailable, "closed");
  ASSERT_EQ(t.a.proc->Stop(SIGTERM), 0);
  t.a = StartNode(t.etcd.endpoints(), t.cluster, "a");
  PutMany(*t.a.proc, "new", 60);
  const Json now = Post(*t.a.proc, "/cache/sync", "")["inventory_fence"];
  ASSERT_NE(now.value("runtime_uuid", ""), old_uuid);
  ASSERT_GT(now["sequence"].get<uint64_t>(), old["sequence"].get<uint64_t>());
  ASSERT_GT(now.value("epoch", 0u), old.value("epoch", 0u)) << old.dump() << now.dump();
  // b's view of the new incarnation covers the new fence...
  const Json done = Post(*t.b.proc, "/cache/metadata/await",
                         Json({{"inventory_fence", now}, {"timeout_ms", 10000}}).dump());
  ASSERT_EQ(done["success"], true) << done.dump();
  EXPECT_EQ(done["runtime_uuid"], now["runtime_uuid"]);
  // ...and the old fence's sequence, but not the old fence: b saw that
  // incarnation leave, so it refuses the fence at once.
  const Json stale = Post(*t.b.proc, "/cache/metadata/await",
                          Json({{"inventory_fence", old}, {"timeout_ms", 30000}}).dump());
  EXPECT_EQ(stale["success"], false);
  EXPECT_NE(stale.value("error_message", "").find("stale fence: runtime " + old_uuid + " of a"),
            std::string::npos)
      << stale.dump();
  // An incarnation b never saw (as if a had restarted twice between two of
  // b's looks at the member list) is stale at once too, by its epoch.
  Json unseen = old;
  unseen["runtime_uuid"] = "an-incarnation-b-never-saw";
  const Json gone = Post(*t.b.proc, "/cache/metadata/await",
                         Json({{"inventory_fence", unseen}, {"timeout_ms", 30000}}).dump());
  EXPECT_EQ(gone["success"], false);
  EXPECT_NE(gone.value("error_message", "")
                .find("a now runs epoch " + std::to_string(now["epoch"].get<uint64_t>())),
            std::string::npos)
      << gone.dump();
  // Without its incarnation the same fence cannot be told from the new one's.
  Json bare = old;
  bare.erase("runtime_uuid");
  bare.erase("epoch");
  EXPECT_EQ(Post(*t.b.proc, "/cache/metadata/await",
                 Json({{"inventory_fence", bare}, {"timeout_ms", 200}}).dump())["success"],
            true);
  // The owner itself refuses its earlier incarnation's fence at once.
  const Json own = Post(*t.a.proc, "/cache/metadata/await",
                        Json({{"inventory_fence", old}, {"timeout_ms", 30000}}).dump());
  EXPECT_NE(own.value("error_message", "").find("stale fence"), std::string::npos) << own.dump();
  // A runtime_uuid that is not a string, or an epoch that is not a count, is
  // a malformed body.
  Json odd = now;
  odd["runtime_uuid"] = 7;
  EXPECT_NE(Post(*t.b.proc, "/cache/metadata/await", Json({{"inventory_fence", odd}}).dump())
                .value("error_message", "")
                .find("body must be"),
            std::string::npos);
  odd = now;
  odd["epoch"] = -1;
  EXPECT_NE(Post(*t.b.proc, "/cache/metadata/await", Json({{"inventory_fence", odd}}).dump())
                .value("error_message", "")
                .find("body must be"),
            std::string::npos);
}

// The owner sends a peer at most one delta batch per 5 ms slot of its clock
// (after the first): puts that come faster than that share batches, however
// slowly each one is made. Puts 300 µs apart (one batch each under a rule
// that only batches back-to-back changes) must reach the peer in no more
// batches than the slots they span, plus the first and the heartbeats.
TEST(Inventory, PutsThatComeFasterThanTheBatchGapShareBatches) {
  TwoManagers t;
  ASSERT_TRUE(t.ready());
  Client& c = **t.client;
  const auto frames_in = [&] {
    return Coverage(*t.b.proc)["streams"]["frames_in"].get<uint64_t>();
  };
  const uint64_t before = frames_in();
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kPuts = 100;
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(c.Put("paced" + std::to_string(i), "v").ok());
    // The pace between puts is what this test is about (slower than back to
    // back, faster than a slot), not a wait for anything: the bound below
    // comes from the time the puts really took, whatever the sleep gives.
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  ASSERT_TRUE(WaitFor([&] { return Coverage(*t.b.proc)["index"]["entries"] == kPuts; }));
  const uint64_t frames = frames_in() - before;
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Slots spanned (kBatchGap in src/cluster/inventory.cc), the first batch,
  // and one heartbeat per quiet second.
  constexpr double kSlotMs = 5;
  const double bound = elapsed_ms / kSlotMs + 2 + elapsed_ms / 1000 + 1;
  EXPECT_LE(double(frames), bound) << frames << " batches in " << elapsed_ms << " ms";
  EXPECT_GE(frames, 1u);
}

TEST(Inventory, ALargeSnapshotIsNeverSeenHalfInstalled) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  constexpr int kObjects = 100000;
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--dram-size", "1GiB"});
  PutMany(*a.proc, "big", kObjects);
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  // Sample at random moments while the snapshot streams: either nothing of a
  // is installed, or all of it.
  std::mt19937 rng(7);
  int samples = 0, installed = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
        Json c = Coverage(*b.proc);
        const uint64_t entries = c["index"]["entries"].get<uint64_t>();
        ++samples;
        EXPECT_TRUE(entries == 0 || entries == kObjects) << entries;
        if (entries == kObjects) ++installed;
        return installed >= 3;
      },
      60000));
  EXPECT_GT(samples, installed);  // some samples came before the install
  EXPECT_EQ(Coverage(*b.proc)["coverage"], "complete");
  EXPECT_LE(Coverage(*b.proc)["index"]["bytes"].get<uint64_t>() / kObjects, 192u);
}

// Long keys (--max-key-bytes 65536): 200 keys of 60 000 bytes are 12 MB of
// records, and a batch put of 100 of them 6 MB of changes, more than one gRPC
// message may carry (4 MiB). The owner cuts its snapshot pages and delta
// frames by bytes as well as by count, so the view completes and every key
// is found, in the snapshot and in deltas, without a reset of the stream.
TEST(Inventory, LongKeysStillFitTheStreamsFrames) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  const std::vector<std::string> flags = {"--max-key-bytes", "65536"};
  Node a = StartNode(etcd.endpoints(), cluster, "a", flags);
  auto key = [](const std::string& prefix, int i) {
    std::string k = prefix + std::to_string(i) + "-";
    k.resize(60000, 'x');
    return k;
  };
  auto put = [&](const std::string& prefix) {  // in batches of 100 (6 MB of keys each)
    auto c = Client::Connect(a.proc->uds());
    ASSERT_TRUE(c.ok());
    for (int at = 0; at < 200; at += 100) {
      std::vector<std::string> keys;
      for (int i = at; i < at + 100; ++i) keys.push_back(key(prefix, i));
      std::vector<PutItem> items;
      for (const std::string& k : keys) items.push_back({k, "v", 1, ""});
      for (const Status& st : (*c)->BatchPut(items)) ASSERT_TRUE(st.ok()) << st.ToString();
    }
  };
  put("snap");  // before b starts: b's snapshot of a
  Node b = StartNode(etcd.endpoints(), cluster, "b", flags);
  ASSERT_TRUE(WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; }));
  put("delta");  // after: deltas
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  for (const char* prefix : {"snap", "delta"}) {
    for (int i = 0; i < 200; i += 13) {
      const std::string k = key(prefix, i);
      ASSERT_TRUE(WaitFor([&] { return (*cb)->Exist(k).ok(); })) << prefix << i;
    }
  }
  // The last deltas may still be on their way: every key arrives.
  ASSERT_TRUE(SeesEntries(*b.proc, 400)) << Coverage(*b.proc).dump();
  const Json m = Coverage(*b.proc);
  EXPECT_EQ(m["coverage"], "complete");
  // One snapshot, then deltas only: no frame was too large for the stream.
  EXPECT_EQ(m["index"]["installs"], 1) << m.dump();
  EXPECT_EQ(m["index"]["resets"], 0) << m.dump();
  EXPECT_EQ(m["streams"]["requester_failures"], 0) << m.dump();
  EXPECT_GE(m["streams"]["bytes_in"].get<uint64_t>(), 400u * 60000) << m.dump();
}

TEST(Inventory, AJournalOverflowIsRepairedByANewSnapshotOfThatOwnerOnly) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  // (a pool large enough that the burst is not evicted)
  Node a = StartNode(etcd.endpoints(), cluster, "a",
                     {"--inventory-journal-bytes", "64KiB", "--dram-size", "512MiB"});
  Node c = StartNode(etcd.endpoints(), cluster, "c");
  PutMany(*c.proc, "c-", 10);
  Node b = StartNode(etcd.endpoints(), cluster, "b", {}, 10);  // survives its pause
  ASSERT_TRUE(WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; }));
  const uint64_t c_installs = Coverage(*b.proc)["index"]["installs"].get<uint64_t>();
  // b stops reading; a writes far more than its journal holds.
  kill(b.proc->pid(), SIGSTOP);
  PutMany(*a.proc, "burst", 20000);
  kill(b.proc->pid(), SIGCONT);
  ASSERT_TRUE(WaitFor(
      [&] {
        Json cov = Coverage(*b.proc);
        return cov["coverage"] == "complete" && cov["index"]["entries"] == 20010;
      },
      30000))
      << Coverage(*b.proc).dump();
  EXPECT_GE(Coverage(*a.proc)["streams"]["resets_sent"].get<uint64_t>(), 1u);
  // Only a's view was taken again (c's stream went on).
  EXPECT_EQ(Coverage(*b.proc)["index"]["installs"].get<uint64_t>(), c_installs + 1);
  EXPECT_EQ(BlobRanks(*b.proc, "burst19999").size(), 1u);
  EXPECT_EQ(BlobRanks(*b.proc, "c-3").size(), 1u);
}

TEST(Inventory, AMemberThatLeavesIsHiddenAtOnceAndOthersKeepTheirEntries) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  Node c = StartNode(etcd.endpoints(), cluster, "c");
  PutMany(*a.proc, "a-", 5);
  PutMany(*c.proc, "c-", 5);
  ASSERT_TRUE(SeesEntries(*b.proc, 10));
  // SIGKILL: the stream breaks at once (a's entries become partial hints),
  // and they vanish when a's member record does, with no delete records.
  a.proc->Stop(SIGKILL);
  // Until then a's last installed entries remain, as partial hints.
  ASSERT_TRUE(WaitFor([&] {
    Json v = Coverage(*b.proc)["owner_views"];
    return v["partial"] == 1 || v["expected"] == 1;
  }));
  if (Coverage(*b.proc)["owner_views"]["partial"] == 1) {
    EXPECT_EQ(BlobRanks(*b.proc, "a-1").size(), 1u);  // a hint, not proof
    EXPECT_EQ(Coverage(*b.proc)["coverage"], "incomplete");
  }
  // The lease runs out kTtl after a's last keepalive; etcd revokes it on its
  // own schedule, later still on a loaded host (sanitizer builds run in parallel).
  ASSERT_TRUE(
      WaitFor([&] { return Coverage(*b.proc)["owner_views"]["expected"] == 1; }, 4 * kTtl * 1000));
  EXPECT_TRUE(BlobRanks(*b.proc, "a-1").empty());
  EXPECT_EQ(BlobRanks(*b.proc, "c-1").size(), 1u);
  EXPECT_EQ(Coverage(*b.proc)["coverage"], "complete");
  // A graceful leave hides c the moment its record is deleted.
  EXPECT_EQ(c.proc->Stop(SIGTERM), 0);
  EXPECT_TRUE(WaitFor([&] { return BlobRanks(*b.proc, "c-1").empty(); }, 2000));
}

TEST(Inventory, AViewOverTheIndexBudgetIsRefusedAndCounted) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  PutMany(*a.proc, "fits-not-", 5000);
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--index-budget", "64KiB"});
  ASSERT_TRUE(WaitFor([&] {
    return Coverage(*b.proc)["index"]["refused_budget"].get<uint64_t>() >= 1;
  })) << Coverage(*b.proc).dump();
  Json cov = Coverage(*b.proc);
  EXPECT_EQ(cov["index"]["entries"], 0);
  EXPECT_LE(cov["index"]["bytes"].get<uint64_t>(), 64u << 10);
  EXPECT_EQ(cov["coverage"], "incomplete");
  EXPECT_EQ(
      testing::ScrapeMetric(*b.proc, "tierkv_index_refused_views_total{reason=\"budget\"}") >= 1,
      true);
  // Unknown, not absent.
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Exist("fits-not-1").code(), Code::kUnavailable);
  EXPECT_TRUE(LocalRoundTrip(*b.proc, "local").ok());
}

// A peer that answers inventory streams with pages out of order.
class BadOwner final : public peer::Peer::Service {
 public:
  explicit BadOwner(std::string uuid) : uuid_(std::move(uuid)) {}
  grpc::Status Inventory(grpc::ServerContext*, const peer::InventoryRequest*,
                         grpc::ServerWriter<peer::InventoryFrame>* w) override {
    served++;
    peer::InventoryFrame f;
    f.mutable_begin()->set_owner_node("evil");
    f.mutable_begin()->set_owner_uuid(uuid_);
    w->Write(f);
    for (uint64_t page : {0, 2}) {  // page 1 is missing
      peer::InventoryFrame p;
      p.mutable_page()->set_page_no(page);
      auto* r = p.mutable_page()->add_records();
      r->set_tenant("default");
      r->set_key("evil-" + std::to_string(page));
      r->set_medium(1);
      r->set_size(1);
      r->set_generation(1);
      w->Write(p);
    }
    peer::InventoryFrame cm;
    cm.mutable_commit()->set_pages(2);
    cm.mutable_commit()->set_records(2);
    w->Write(cm);
    return grpc::Status::OK;
  }
  std::atomic<int> served{0};

 private:
  std::string uuid_;
};

TEST(Inventory, AMalformedSnapshotIsRefusedAndNothingIsInstalled) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  BadOwner bad("bad-uuid");
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&bad);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server);
  // Register the bad peer as a live member by hand.
  auto kv = EtcdFor(etcd);
  auto lease = kv->GrantLease(30);
  ASSERT_TRUE(lease.ok());
  Json record = {{"node_id", "evil"},
                 {"rank", 7},
                 {"endpoint", "127.0.0.1:" + std::to_string(port)},
                 {"runtime_uuid", "bad-uuid"},
                 {"epoch", 1},
                 {"stream_protocol", "tierkv/inventory-stream/v1"}};
  ASSERT_TRUE(kv->Put("/tierkv/v1/" + cluster + "/members/evil", record.dump(), lease->id).ok());
  ASSERT_TRUE(WaitFor([&] {
    Json cov = Coverage(*b.proc);
    return bad.served >= 2 && cov["index"]["rejected_views"].get<uint64_t>() >= 2;
  })) << Coverage(*b.proc).dump();
  Json cov = Coverage(*b.proc);
  EXPECT_EQ(cov["index"]["entries"], 0);
  EXPECT_EQ(cov["owner_views"]["complete"], 0);
  EXPECT_EQ(cov["coverage"], "incomplete");
  EXPECT_TRUE(BlobRanks(*b.proc, "evil-0").empty());
  EXPECT_EQ(GetText(*b.proc, "/ha_status"), "serving");
  EXPECT_TRUE(LocalRoundTrip(*b.proc, "still-serving").ok());
  ASSERT_TRUE(kv->RevokeLease(lease->id).ok());
  EXPECT_TRUE(WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; }));
  server->Shutdown();
}

// An owner serves one stream per requester node: a second stream from the
// same node cancels the first; a stream that names no requester is refused.
// Nothing else is disturbed: another manager's view of the owner stays
// complete.
TEST(Inventory, ANewerStreamOfTheSameRequesterCancelsTheOlder) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  PutMany(*a.proc, "s", 10);
  ASSERT_TRUE(SeesEntries(*b.proc, 10));
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
  auto open = [&](grpc::ClientContext& ctx, const std::string& node) {
    peer::InventoryRequest req;
    req.set_requester_node(node);
    req.set_requester_uuid(node + "-uuid");
    return stub->Inventory(&ctx, req);
  };
  // b's own stream may have been refused once while a did not list b yet.
  const int refused_before = Coverage(*a.proc)["streams"]["owner_streams_refused"];
  {
    grpc::ClientContext ctx;
    auto nameless = open(ctx, "");
    peer::InventoryFrame f;
    EXPECT_FALSE(nameless->Read(&f));
    EXPECT_EQ(nameless->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    auto stranger = open(ctx, "x");  // not a member (yet)
    peer::InventoryFrame f;
    EXPECT_FALSE(stranger->Read(&f));
    const grpc::Status st = stranger->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(st.error_message().find("not a live member"), std::string::npos);
  }
  const int64_t lease = RegisterByHand(etcd, cluster, "x", "x-uuid", 9);
  ASSERT_NE(lease, 0);
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*a.proc).count("x") == 1; }));
  grpc::ClientContext first_ctx, second_ctx;
  auto first = open(first_ctx, "x");
  peer::InventoryFrame f;
  ASSERT_TRUE(first->Read(&f));
  ASSERT_TRUE(f.has_begin());
  auto second = open(second_ctx, "x");
  ASSERT_TRUE(second->Read(&f));
  ASSERT_TRUE(f.has_begin());
  // The first ends (after whatever it had already sent); the second goes on.
  while (first->Read(&f)) {
  }
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::CANCELLED);
  int pages = 0;
  while (second->Read(&f) && !f.has_commit()) pages += f.has_page();
  EXPECT_EQ(f.commit().records(), 10u);
  EXPECT_EQ(pages, 1);
  const Json m = Coverage(*a.proc);
  EXPECT_EQ(m["streams"]["owner_streams_replaced"], 1) << m.dump();
  EXPECT_EQ(m["streams"]["owner_streams_refused"], refused_before + 2) << m.dump();
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_inventory_owner_streams_replaced_total"), 1);
  EXPECT_TRUE(WaitFor([&] { return Coverage(*a.proc)["streams"]["owner_streams_open"] == 2; }));
  second_ctx.TryCancel();
  ASSERT_TRUE(EtcdFor(etcd)->RevokeLease(lease).ok());
  EXPECT_TRUE(WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; }));
  EXPECT_EQ(Coverage(*b.proc)["index"]["entries"], 10);
}

// A peer that stops reading its stream holds the owner's encoded changes
// after its position (until its writes block, or it falls behind the
// journal and is reset), but never more than the journal keeps; other peers
// keep up, and once the stalled stream ends nothing stays held.
TEST(Inventory, AStalledStreamHoldsNoMoreEncodedChangesThanTheJournal) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  constexpr int64_t kJournal = 4 << 20;
  Node a =
      StartNode(etcd.endpoints(), cluster, "a",
                {"--inventory-journal-bytes", std::to_string(kJournal), "--dram-size", "1GiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
  const int64_t lease = RegisterByHand(etcd, cluster, "stalled", "stalled-uuid", 9);
  ASSERT_NE(lease, 0);
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*a.proc).count("stalled") == 1; }));
  grpc::ClientContext ctx;
  peer::InventoryRequest req;
  req.set_requester_node("stalled");
  req.set_requester_uuid("stalled-uuid");
  auto stalled = stub->Inventory(&ctx, req);
  peer::InventoryFrame f;
  while (stalled->Read(&f) && !f.has_commit()) {
  }
  ASSERT_TRUE(f.has_commit());
  // About 11 MB of encoded changes (keys of 200 bytes), more than the
  // journal and than a stream's flow-control window.
  constexpr int kObjects = 40000;
  const std::string prefix(200, 'k');
  for (int part = 0; part < 4; ++part) {
    PutMany(*a.proc, prefix + std::to_string(part) + "-", kObjects / 4);
    const Json m = Coverage(*a.proc);
    EXPECT_LE(m["streams"]["delta_buffer_bytes"].get<int64_t>(), kJournal) << m.dump();
    EXPECT_LE(testing::ScrapeMetric(*a.proc, "tierkv_inventory_delta_buffer_bytes"), kJournal);
  }
  ASSERT_TRUE(SeesEntries(*b.proc, kObjects)) << Coverage(*b.proc).dump();
  ctx.TryCancel();
  EXPECT_TRUE(WaitFor([&] {
    const Json now = Coverage(*a.proc);
    return now["streams"]["owner_streams_open"] == 1 && now["streams"]["delta_buffer_bytes"] == 0;
  })) << Coverage(*a.proc).dump();
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_inventory_delta_buffer_bytes"), 0);
}

TEST(Inventory, AStreamThatGoesSilentTurnsTheOwnersViewPartialAndLookupsUnknown) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  // Its peers reach a only through the proxy.
  ProxiedNode pa = StartBehindProxy(etcd.endpoints(), cluster, "a");
  std::unique_ptr<ManagerProcess>& a = pa.proc;
  testing::FaultProxy& proxy = *pa.proxy;
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--inventory-stall-ms", "2000"});
  auto ca = Client::Connect(a->uds());
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_TRUE((*ca)->Put("before", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return (*cb)->Exist("before").ok(); }));

  proxy.SetMode(testing::FaultProxy::Mode::kBlackhole);
  ASSERT_TRUE((*ca)->Put("during", "v").ok());
  // Within --inventory-stall-ms and a quarter of it the view is partial: the
  // key b never heard of is unknown, not absent.
  ASSERT_TRUE(WaitFor([&] { return (*cb)->Exist("during").code() == Code::kUnavailable; }))
      << (*cb)->Exist("during").ToString();
  for (int i = 0; i < 50; ++i) {
    const Status st = (*cb)->Exist("during");
    ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  }
  EXPECT_EQ(Coverage(*b.proc)["coverage"], "incomplete") << Coverage(*b.proc).dump();
  EXPECT_GE(testing::ScrapeMetric(*b.proc, "tierkv_inventory_requester_stalls_total"), 1);

  proxy.SetMode(testing::FaultProxy::Mode::kPass);
  EXPECT_TRUE(WaitFor([&] { return (*cb)->Exist("during").ok(); }))
      << (*cb)->Exist("during").ToString();
}

void PutInNamespace(const ManagerProcess& m, const std::string& ns, const std::string& prefix,
                    int n) {
  ClientOptions o;
  o.name_space = ns;
  auto c = Client::Connect(m.uds(), o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int i = 0; i < n; ++i) ASSERT_TRUE((*c)->Put(prefix + std::to_string(i), "v").ok());
}

TEST(Inventory, ScopeIsFilteredAtTheOwner) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  const std::string ns1 = "tierkv:v1:" + std::string(64, '1');
  const std::string ns2 = "tierkv:v1:" + std::string(64, '2');
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  PutInNamespace(*a.proc, ns1, "one-", 30);
  PutInNamespace(*a.proc, ns2, "two-", 20);
  PutInNamespace(*a.proc, "", "none-", 10);
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--metadata-namespace", ns1});
  Node c = StartNode(etcd.endpoints(), cluster, "c");
  Node d = StartNode(etcd.endpoints(), cluster, "d", {"--metadata-empty-scope"});
  auto entries = [&](const Node& n) { return Coverage(*n.proc)["index"]["entries"]; };
  ASSERT_TRUE(WaitFor([&] {
    return Coverage(*b.proc)["coverage"] == "complete" &&
           Coverage(*c.proc)["coverage"] == "complete" &&
           Coverage(*d.proc)["coverage"] == "complete";
  }));
  EXPECT_EQ(entries(b), 30);  // only ns1 ever reached b
  EXPECT_EQ(entries(c), 60);
  EXPECT_EQ(entries(d), 0);
  EXPECT_EQ(Coverage(*b.proc)["scope_kind"], "exact");
  EXPECT_EQ(Coverage(*b.proc)["namespace_count"], 1);
  EXPECT_EQ(Coverage(*d.proc)["scope_kind"], "empty");
  EXPECT_NE(Coverage(*b.proc)["scope_digest"], Coverage(*c.proc)["scope_digest"]);
  // Deltas are filtered too.
  PutInNamespace(*a.proc, ns2, "later-", 5);
  PutInNamespace(*a.proc, ns1, "later1-", 5);
  ASSERT_TRUE(WaitFor([&] { return entries(c) == 70; }));
  ASSERT_TRUE(WaitFor([&] { return entries(b) == 35; }));
  EXPECT_TRUE(BlobRanks(*b.proc, "later-1").empty());
  EXPECT_EQ(BlobRanks(*b.proc, "later1-1").size(), 1u);
  EXPECT_EQ(entries(d), 0);
}

TEST(Inventory, LookupsSayWhereAKeyIsLocalRemoteAbsentOrUnknown) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  PutMany(*a.proc, "on-a-", 3);
  ASSERT_TRUE(SeesEntries(*b.proc, 3));
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  Client& c = **cb;
  ASSERT_TRUE(c.Put("on-b", "x").ok());
  // Local.
  auto local = c.Query("on-b");
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(local->owner.empty());
  // Remote: found through the index, with the owner and its rank.
  auto remote = c.Query("on-a-1");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->owner, "a");
  EXPECT_EQ(remote->owner_rank, RankOf(*a.proc));
  EXPECT_EQ(remote->size, 64u);
  EXPECT_EQ(remote->media, MediumBit(Medium::kDram));
  EXPECT_TRUE(c.Exist("on-a-2").ok());
  // local_only keeps the standalone answer.
  EXPECT_EQ(c.Query("on-a-1", kDefaultTenant, {true}).status().code(), Code::kNotFound);
  EXPECT_EQ(c.Exist("on-a-1", kDefaultTenant, {true}).code(), Code::kNotFound);
  // Absent, proved: every owner's view is complete.
  EXPECT_EQ(c.Exist("nowhere").code(), Code::kNotFound);
  std::vector<std::string_view> keys = {"on-b", "on-a-0", "nowhere"};
  auto batch = c.BatchQuery(keys);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_TRUE(batch[0].ok() && batch[0]->owner.empty());
  EXPECT_TRUE(batch[1].ok() && batch[1]->owner == "a");
  EXPECT_EQ(batch[2].status().code(), Code::kNotFound);
  auto exist = c.BatchExist(keys);
  EXPECT_TRUE(exist[0].ok() && exist[1].ok());
  EXPECT_EQ(exist[2].code(), Code::kNotFound);
  // The CLI says who owns it.
  std::string out, err;
  ASSERT_EQ(
      testing::RunCommand({TIERKV_CLI_BIN, "-a", b.proc->uds(), "stat", "on-a-1"}, "", &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("owner:   a (rank"), std::string::npos) << out;
  // Unknown: an expected owner whose view is not complete (a is paused, its
  // stream breaks, its entries are only partial hints until it leaves).
  kill(a.proc->pid(), SIGSTOP);
  Node late = StartNode(etcd.endpoints(), cluster, "late");
  auto cl = Client::Connect(late.proc->uds());
  ASSERT_TRUE(cl.ok());
  const Status unknown = (*cl)->Exist("nowhere");
  EXPECT_EQ(unknown.code(), Code::kUnavailable) << unknown.ToString();
  EXPECT_NE(unknown.message().find("unknown"), std::string::npos) << unknown.ToString();
  kill(a.proc->pid(), SIGCONT);
}

TEST(Inventory, ALookupOutsideTheScopeIsUnavailableNotAbsent) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  const std::string ns1 = "tierkv:v1:" + std::string(64, '1');
  const std::string ns2 = "tierkv:v1:" + std::string(64, '2');
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--metadata-namespace", ns1});
  ASSERT_TRUE(WaitFor([&] { return Coverage(*b.proc)["coverage"] == "complete"; }));
  ClientOptions o;
  o.name_space = ns2;
  auto c = Client::Connect(b.proc->uds(), o);
  ASSERT_TRUE(c.ok());
  const Status st = (*c)->Exist("anything");
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("scope"), std::string::npos) << st.ToString();
  // Local service of that namespace works as ever.
  ASSERT_TRUE((*c)->Put("mine", "v").ok());
  EXPECT_TRUE((*c)->Exist("mine").ok());
}

}  // namespace
}  // namespace tierkv
