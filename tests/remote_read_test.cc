// Remote reads through source grants and the data channel, with real etcd and
// real managers: mixed sizes verified byte for byte, a batch over three
// owners, a stale index entry, a value held only on the owner's SSD, the
// owner's transfer budget, and the owner killed in the middle of the READs.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "cluster_util.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::ScrapeMetric;
using testing::WaitFor;

void PutAll(const ManagerProcess& m, const std::vector<std::pair<std::string, size_t>>& objs) {
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const auto& [key, size] : objs) {
    ASSERT_TRUE((*c)->Put(key, PatternValue(key, size)).ok()) << key;
  }
}

int64_t Entries(const ManagerProcess& m) {
  Json j = GetJson(m, "/cache/metadata");
  return j.is_object() ? j["index"]["entries"].get<int64_t>() : -1;
}

bool SeesAll(const ManagerProcess& m, int64_t n) {
  return WaitFor([&] { return Entries(m) == n; }, 20000);
}

// GOOD_END of tracepoint `name` in m's /metrics/ptracer table; -1 when the
// table has no such row.
int64_t TraceGood(const ManagerProcess& m, const std::string& name) {
  std::istringstream table(GetText(m, "/metrics/ptracer"));
  for (std::string line; std::getline(table, line);) {
    std::istringstream row(line);
    std::string date, time, row_name;
    int64_t begin = 0, good = -1;
    if (row >> date >> time >> row_name >> begin >> good && row_name == name) return good;
  }
  return -1;
}

// The owner's grants are all gone and nothing stays reserved.
bool GrantsDrained(const ManagerProcess& owner) {
  return WaitFor([&] {
    return ScrapeMetric(owner, "tierkv_grants_live") == 0 &&
           ScrapeMetric(owner, "tierkv_grants_reserved_bytes") == 0;
  });
}

TEST(RemoteRead, TwoHundredSixtyObjectsOfMixedSizesArriveByteForByte) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--dram-size", "256MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--dram-size", "256MiB"});
  std::vector<std::pair<std::string, size_t>> objs;
  std::mt19937 rng(7);
  for (int i = 0; i < 260; ++i) {
    const size_t size = i % 13 == 0  ? (1u << 20) + static_cast<size_t>(rng() % 4096)
                        : i % 5 == 0 ? 1 + rng() % 7
                                     : 1 + rng() % (96u << 10);
    objs.emplace_back("obj" + std::to_string(i), size);
  }
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, 260)) << GetJson(*b.proc, "/cache/metadata").dump();

  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  // One by one for the first 10, in batches of 50 for the rest.
  for (int i = 0; i < 10; ++i) {
    Result<std::string> got = (*c)->Get(objs[i].first);
    ASSERT_TRUE(got.ok()) << objs[i].first << ": " << got.status().ToString();
    EXPECT_EQ(*got, PatternValue(objs[i].first, objs[i].second)) << objs[i].first;
  }
  for (size_t at = 10; at < objs.size(); at += 50) {
    std::vector<std::string_view> keys;
    for (size_t i = at; i < std::min(objs.size(), at + 50); ++i) keys.push_back(objs[i].first);
    std::vector<Result<std::string>> got = (*c)->BatchGet(keys);
    for (size_t j = 0; j < keys.size(); ++j) {
      const auto& [key, size] = objs[at + j];
      ASSERT_TRUE(got[j].ok()) << key << ": " << got[j].status().ToString();
      EXPECT_TRUE(*got[j] == PatternValue(key, size)) << key << " differs";
    }
  }
  // Each is an ordinary local object on b now.
  LookupOptions local;
  local.local_only = true;
  for (const auto& [key, size] : objs) EXPECT_TRUE((*c)->Exist(key, kDefaultTenant, local).ok());
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), 260);
  uint64_t total = 0;
  for (const auto& o : objs) total += o.second;
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_bytes_total"),
            static_cast<int64_t>(total));
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_bytes_sent_total"), static_cast<int64_t>(total));
  // Far from the owner's connection limit: nothing was shed or refused.
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_connections_total{result=\"shed\"}"), 0);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_connections_total{result=\"refused\"}"), 0);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_calls_refused_total{reason=\"sessions\"}"), 0);
  EXPECT_TRUE(GrantsDrained(*a.proc));
  EXPECT_TRUE(
      WaitFor([&] { return ScrapeMetric(*b.proc, "tierkv_remote_grants_awaiting_release") == 0; }));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_release_calls_total{result=\"failed\"}"), 0);
  // The stages are traced: 15 fetch calls (10 gets, 5 batches), at least one
  // authorization each, one READ (after the authorization's answer, or right
  // behind the authorization: the first value of a call, when it is read
  // whole) and one commit per value on b, one READ answer per value on a.
  EXPECT_EQ(TraceGood(*b.proc, "TP_REMOTE_FETCH"), 15);
  EXPECT_GE(TraceGood(*b.proc, "TP_REMOTE_AUTHORIZE"), 15);
  const int64_t early = ScrapeMetric(*b.proc, "tierkv_remote_early_reads_total");
  EXPECT_GE(early, 1);
  EXPECT_LE(early, 15);
  EXPECT_EQ(TraceGood(*b.proc, "TP_REMOTE_READ") + early, 260);
  EXPECT_EQ(TraceGood(*b.proc, "TP_REMOTE_STORE"), 260);
  EXPECT_GE(TraceGood(*a.proc, "TP_PEER_AUTHORIZE"), 15);
  // (An answer is traced once its last byte is written, which may be just
  // after the requester has it.)
  EXPECT_TRUE(WaitFor([&] { return TraceGood(*a.proc, "TP_PEER_READ") == 260; }));
  EXPECT_EQ(TraceGood(*a.proc, "TP_REMOTE_FETCH"), -1);  // a read nothing from others
  // A key nowhere is a plain miss, quickly.
  EXPECT_EQ((*c)->Get("nowhere").status().code(), Code::kNotFound);
}

TEST(RemoteRead, ABatchSpanningThreeOwnersAndMissingKeys) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  std::vector<Node> owners;
  for (const char* id : {"a", "b", "c"}) owners.push_back(StartNode(etcd.endpoints(), cluster, id));
  Node r = StartNode(etcd.endpoints(), cluster, "r");
  std::vector<std::string> keys;
  for (Node& o : owners) {
    std::vector<std::pair<std::string, size_t>> objs;
    for (int i = 0; i < 20; ++i) {
      objs.emplace_back(o.id + "-" + std::to_string(i), 1000 + 7000 * static_cast<size_t>(i));
    }
    PutAll(*o.proc, objs);
  }
  ASSERT_TRUE(SeesAll(*r.proc, 60));
  // Interleaved owners, and two keys held by nobody.
  for (int i = 0; i < 20; ++i) {
    for (Node& o : owners) keys.push_back(o.id + "-" + std::to_string(i));
  }
  keys.insert(keys.begin() + 7, "missing-1");
  keys.push_back("missing-2");
  std::vector<std::string_view> views(keys.begin(), keys.end());
  auto c = Client::Connect(r.proc->uds());
  ASSERT_TRUE(c.ok());
  std::vector<Result<std::string>> got = (*c)->BatchGet(views);
  ASSERT_EQ(got.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].rfind("missing", 0) == 0) {
      EXPECT_EQ(got[i].status().code(), Code::kNotFound) << keys[i];
      continue;
    }
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status().ToString();
    const size_t n = 1000 + 7000 * std::stoul(keys[i].substr(2));
    EXPECT_TRUE(*got[i] == PatternValue(keys[i], n)) << keys[i];
  }
  EXPECT_EQ(ScrapeMetric(*r.proc, "tierkv_remote_fetched_objects_total"), 60);
  for (Node& o : owners) {
    EXPECT_EQ(ScrapeMetric(*o.proc, "tierkv_data_reads_total{result=\"sent\"}"), 20) << o.id;
    // Every value in DRAM: each authorization was decided on the data
    // channel's own thread, none had to go to the blocking pool.
    EXPECT_GT(
        ScrapeMetric(*o.proc, "tierkv_data_authorizations_decided_total{where=\"event_loop\"}"), 0)
        << o.id;
    EXPECT_EQ(ScrapeMetric(*o.proc, "tierkv_data_authorizations_decided_total{where=\"pool\"}"), 0)
        << o.id;
    EXPECT_TRUE(GrantsDrained(*o.proc)) << o.id;
  }
}

// The peer API as a foreign requester sees it.
struct PeerProbe {
  explicit PeerProbe(const std::string& addr)
      : stub(peer::Peer::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()))) {}

  std::string OwnerUuid() {
    grpc::ClientContext ctx;
    peer::IdentifyRequest req;
    peer::IdentifyResponse resp;
    EXPECT_TRUE(stub->Identify(&ctx, req, &resp).ok());
    return resp.runtime_uuid();
  }

  // The generation of `key` in the owner's inventory snapshot (0: absent).
  uint64_t Generation(const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    peer::InventoryRequest req;
    req.set_requester_node("probe");
    req.set_requester_uuid("probe-uuid");
    req.set_expect_owner_uuid(OwnerUuid());
    auto reader = stub->Inventory(&ctx, req);
    peer::InventoryFrame f;
    uint64_t gen = 0;
    while (reader->Read(&f) && !f.has_commit()) {
      for (const auto& rec : f.page().records()) {
        if (rec.key() == key && rec.medium() == 1) gen = rec.generation();
      }
    }
    ctx.TryCancel();
    (void)reader->Finish();
    return gen;
  }

  grpc::Status Authorize(uint64_t ticket, const std::string& key, uint64_t generation,
                         peer::AuthorizeResponse* resp, std::string owner_uuid = "") {
    grpc::ClientContext ctx;
    peer::AuthorizeRequest req;
    req.set_requester_node("probe");
    req.set_requester_uuid("probe-uuid");
    req.set_expect_owner_uuid(owner_uuid.empty() ? OwnerUuid() : owner_uuid);
    req.set_ticket(ticket);
    peer::GrantItem* item = req.add_items();
    item->set_tenant(std::string(kDefaultTenant));
    item->set_key(key);
    item->set_generation(generation);
    return stub->Authorize(&ctx, req, resp);
  }

  bool Release(uint64_t ticket) {
    grpc::ClientContext ctx;
    peer::ReleaseRequest req;
    req.set_requester_uuid("probe-uuid");
    req.set_ticket(ticket);
    peer::ReleaseResponse resp;
    EXPECT_TRUE(stub->Release(&ctx, req, &resp).ok());
    return resp.released();
  }

  std::unique_ptr<peer::Peer::Stub> stub;
};

// Long keys (--max-key-bytes 131072): a batch get of 64 values whose keys
// are 100 000 bytes each would be an authorization of 6 MB, more than an
// AUTHORIZE (or a gRPC message) may carry; the requester cuts its segments
// by their keys' bytes too, over both ways of authorizing.
TEST(RemoteRead, ABatchOfLongKeysIsAuthorizedInSegmentsThatFit) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  const std::vector<std::string> flags = {"--max-key-bytes", "131072"};
  Node a = StartNode(etcd.endpoints(), cluster, "a", flags);
  Node b = StartNode(etcd.endpoints(), cluster, "b", flags);  // over the data channel
  std::vector<std::string> grpc = flags;
  grpc.insert(grpc.end(), {"--remote-authorize-via", "grpc"});
  Node d = StartNode(etcd.endpoints(), cluster, "d", grpc);
  std::vector<std::pair<std::string, size_t>> objs;
  for (int i = 0; i < 64; ++i) {
    std::string k = "long-" + std::to_string(i) + "-";
    k.resize(100000, 'k');
    objs.emplace_back(k, 3000 + static_cast<size_t>(i));
  }
  PutAll(*a.proc, objs);
  for (Node* n : {&b, &d}) ASSERT_TRUE(SeesAll(*n->proc, 64)) << n->id;
  for (Node* n : {&b, &d}) {
    auto c = Client::Connect(n->proc->uds());
    ASSERT_TRUE(c.ok());
    std::vector<std::string_view> keys;
    for (const auto& o : objs) keys.push_back(o.first);
    std::vector<Result<std::string>> got = (*c)->BatchGet(keys);
    ASSERT_EQ(got.size(), objs.size());
    for (size_t i = 0; i < objs.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << n->id << " " << i << ": " << got[i].status().ToString();
      EXPECT_TRUE(*got[i] == PatternValue(objs[i].first, objs[i].second)) << n->id << " " << i;
    }
    EXPECT_EQ(ScrapeMetric(*n->proc, "tierkv_remote_fetched_objects_total"), 64) << n->id;
  }
}

TEST(RemoteRead, AStaleEntryIsRefusedAndTheNewValueIsReadAfter) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE((*ca)->Put("k", "first value").ok());
  PeerProbe probe(a.addr);
  // Peer requests are served to live members only: the probe registers.
  const int64_t lease = RegisterByHand(etcd, cluster, "probe", "probe-uuid", 9);
  ASSERT_NE(lease, 0);
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*a.proc).count("probe") == 1; }));
  const uint64_t old_gen = probe.Generation("k");
  ASSERT_NE(old_gen, 0u);
  ASSERT_TRUE((*ca)->Upsert("k", "second value").ok());
  const uint64_t new_gen = probe.Generation("k");
  ASSERT_NE(new_gen, old_gen);

  // The old generation lends nothing; neither does an older incarnation's UUID.
  peer::AuthorizeResponse resp;
  ASSERT_TRUE(probe.Authorize(11, "k", old_gen, &resp).ok());
  ASSERT_EQ(resp.items_size(), 1);
  EXPECT_EQ(resp.items(0).code(), static_cast<uint32_t>(Code::kNotFound));
  EXPECT_NE(resp.items(0).message().find("another value"), std::string::npos);
  EXPECT_FALSE(probe.Release(11));  // nothing was granted, nothing kept
  peer::AuthorizeResponse wrong;
  EXPECT_EQ(probe.Authorize(12, "k", new_gen, &wrong, "an-old-incarnation").error_code(),
            grpc::StatusCode::NOT_FOUND);
  peer::AuthorizeResponse fresh;
  ASSERT_TRUE(probe.Authorize(13, "k", new_gen, &fresh).ok());
  EXPECT_EQ(fresh.items(0).code(), 0u);
  EXPECT_EQ(fresh.items(0).size(), std::string("second value").size());
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_live"), 1);
  EXPECT_TRUE(probe.Release(13));
  EXPECT_FALSE(probe.Release(13));  // idempotent
  EXPECT_TRUE(GrantsDrained(*a.proc));
  EXPECT_GE(ScrapeMetric(*a.proc, "tierkv_grants_items_total{result=\"stale\"}"), 1);

  // The requester reads the new value once its index has the new generation.
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  EXPECT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("k");
    return v.ok() && *v == "second value";
  }));
}

// Without peer mTLS anyone who reaches the peer port can name any requester:
// names that are no live member's are refused before they take a grant slot
// (1 100 made-up names, more than the 1 024 slots), and a real member's
// remote reads go on.
TEST(RemoteRead, RequestersThatAreNotLiveMembersAreRefused) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE((*ca)->Put("k", "value").ok());
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
  PeerProbe probe(a.addr);
  const std::string owner = probe.OwnerUuid();
  for (int i = 0; i < 1100; ++i) {
    grpc::ClientContext ctx;
    peer::AuthorizeRequest req;
    req.set_requester_node("forged-" + std::to_string(i));
    req.set_requester_uuid("uuid-" + std::to_string(i));
    req.set_expect_owner_uuid(owner);
    req.set_ticket(1000 + i);
    peer::GrantItem* item = req.add_items();
    item->set_tenant(std::string(kDefaultTenant));
    item->set_key("k");
    peer::AuthorizeResponse resp;
    const grpc::Status st = stub->Authorize(&ctx, req, &resp);
    ASSERT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << i << " " << st.error_message();
    ASSERT_NE(st.error_message().find("not a live member"), std::string::npos);
  }
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_live"), 0);
  // A live member's node id with another runtime UUID is no better.
  {
    grpc::ClientContext ctx;
    peer::InventoryRequest req;
    req.set_requester_node("b");
    req.set_requester_uuid("not-b's-uuid");
    auto reader = stub->Inventory(&ctx, req);
    peer::InventoryFrame f;
    EXPECT_FALSE(reader->Read(&f));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  EXPECT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("k");
    return v.ok() && *v == "value";
  }));
}

// A large value moves as ranges on several data connections at once, but in
// no more ranges than the requester has CPUs to receive and check them on.
TEST(RemoteRead, ALargeValueMovesInNoMoreRangesThanTheRequesterHasCpus) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--data-connections", "4"});
  constexpr size_t kBig = 16u << 20;  // four ranges of 4 MiB at most
  PutAll(*a.proc, {{"big", kBig}});
  ASSERT_TRUE(SeesAll(*b.proc, 1));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  Result<std::string> v = (*c)->Get("big");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(*v == PatternValue("big", kBig));
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  ASSERT_EQ(sched_getaffinity(0, sizeof cpus, &cpus), 0);  // b runs on these too
  const int64_t ranges = std::min(4, CPU_COUNT(&cpus));
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_reads_total{result=\"sent\"}"), ranges);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_bytes_sent_total"), static_cast<int64_t>(kBig));
}

// A value held only on the owner's SSD is authorized on the owner's blocking
// pool (its rewarm may take a while), one in DRAM on the data channel's own
// thread; both arrive whole.
TEST(RemoteRead, AnSsdOnlyValueIsAuthorizedOffTheDataChannelsEventLoop) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  Node a = StartNode(etcd.endpoints(), cluster, "a",
                     {"--ssd-dir", dir.path + "/ssd", "--ssd-size", "64MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  const std::vector<std::pair<std::string, size_t>> objs = {{"cold", 300000}, {"hot", 4096}};
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, 2));
  httplib::Client http(a.proc->rest());
  auto evicted = http.Post("/memory/evict", R"({"chunk_hashes":["cold"],"locations":["ssd"]})",
                           "application/json");
  ASSERT_TRUE(evicted && evicted->status == 200);
  auto on_a = Client::Connect(a.proc->uds());
  ASSERT_TRUE(on_a.ok());
  ASSERT_TRUE(WaitFor([&] {
    Result<ObjectInfo> q = (*on_a)->Query("cold", kDefaultTenant, {.local_only = true});
    return q.ok() && q->media == MediumBit(Medium::kSsd);
  }));
  auto on_b = Client::Connect(b.proc->uds());
  ASSERT_TRUE(on_b.ok());
  for (const auto& [key, size] : objs) {
    Result<std::string> got = (*on_b)->Get(key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_TRUE(*got == PatternValue(key, size)) << key;
  }
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_authorizations_decided_total{where=\"pool\"}"), 1);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_authorizations_decided_total{where=\"event_loop\"}"),
            1);
  EXPECT_TRUE(GrantsDrained(*a.proc));
}

TEST(RemoteRead, TheOwnersTransferBudgetBoundsWhatIsLent) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--transfer-budget", "1MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  PutAll(*a.proc, {{"big", 2u << 20}, {"small", 256u << 10}});
  ASSERT_TRUE(SeesAll(*b.proc, 2));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  Result<std::string> big = (*c)->Get("big");
  EXPECT_EQ(big.status().code(), Code::kNotFound);
  EXPECT_NE(big.status().message().find("transfer budget"), std::string::npos)
      << big.status().ToString();
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetch_misses_total{reason=\"budget\"}"), 1);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_items_total{result=\"budget\"}"), 1);
  Result<std::string> small = (*c)->Get("small");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_TRUE(*small == PatternValue("small", 256u << 10));
  EXPECT_TRUE(GrantsDrained(*a.proc));
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_budget_bytes"), 1 << 20);
}

TEST(RemoteRead, AnOwnerKilledDuringTheReadsIsABoundedMiss) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--dram-size", "600MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b",
                     {"--dram-size", "600MiB", "--data-connections", "1"});
  const int n = 256;
  std::vector<std::pair<std::string, size_t>> objs;
  for (int i = 0; i < n; ++i) objs.emplace_back("m" + std::to_string(i), 1u << 20);
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, n));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  std::vector<std::string_view> keys;
  for (const auto& o : objs) keys.push_back(o.first);
  const auto start = std::chrono::steady_clock::now();
  auto batch = std::async(std::launch::async, [&] { return (*c)->BatchGet(keys); });
  // Kill the owner as soon as the first value has arrived (not when the
  // owner has begun to send: on a slow build the kill could then land
  // before any value is whole).
  ASSERT_TRUE(WaitFor(
      [&] { return ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total") > 0; }, 20000));
  ASSERT_EQ(::kill(a.proc->pid(), SIGKILL), 0);
  std::vector<Result<std::string>> got = batch.get();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0);  // bounded by the data channel's deadline, not a hang
  size_t ok = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].ok()) {
      ++ok;
      EXPECT_TRUE(*got[i] == PatternValue(objs[i].first, objs[i].second)) << objs[i].first;
    } else {
      EXPECT_EQ(got[i].status().code(), Code::kNotFound) << got[i].status().ToString();
    }
  }
  EXPECT_GT(ok, 0u);
  EXPECT_LT(ok, got.size());  // the kill landed in the middle of the READs
  // Nothing leaks on the requester: no grant slot held, no allocation left
  // behind (what is stored is exactly what was fetched), and it keeps serving.
  EXPECT_TRUE(
      WaitFor([&] { return ScrapeMetric(*b.proc, "tierkv_remote_grants_awaiting_release") == 0; }));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), static_cast<int64_t>(ok));
  EXPECT_TRUE(LocalRoundTrip(*b.proc, "still-serving").ok());
  // The owner's restart (once its lease is gone) is a new incarnation that
  // holds no grant of the old one.
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*b.proc).count("a") == 0; }, 20000));
  a.proc = std::make_unique<ManagerProcess>(NodeArgs(etcd.endpoints(), cluster, "a", a.addr));
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_live"), 0);
}

}  // namespace
}  // namespace tierkv
