// Drain jobs in cluster mode: the coordinator moves every object of a node to
// the other managers through the grant path, under a running workload, with
// nothing lost; query reports the one-line summary; cancel stops a job;
// refusals are clear; a source removes a value only once its own view of the
// target covers the target's fence.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "cluster_util.h"
#include "drain_util.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::ScrapeMetric;
using testing::WaitFor;

// The summary's value of `field` ("" when absent).
std::string Field(const std::string& line, const std::string& field) {
  const size_t at = line.find(field + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + field.size() + 1;
  return line.substr(from, line.find(' ', from) - from);
}

// Waits up to `ms` for job `id` on `coord` to end; its last summary line
// ("" when none came; its state is still "running" when it did not end).
std::string AwaitJobEnd(const ManagerProcess& coord, const std::string& id, int ms) {
  std::string line;
  WaitFor(
      [&] {
        line = GetText(coord, "/api/v1/drain_jobs/query?job_id=" + id);
        return !line.empty() && Field(line, "state") != "running";
      },
      ms);
  return line;
}

// One etcd member, the coordinator "a" and a manager "b", both started with
// `flags`; destroyed in reverse (the managers before etcd).
struct CoordinatorAndB {
  explicit CoordinatorAndB(const std::vector<std::string>& flags = {})
      : a(StartCoordinator(etcd.endpoints(), cluster, flags)),
        b(StartNode(etcd.endpoints(), cluster, "b", flags)) {
    // Each sees the other, with a complete view, before the test begins.
    const auto complete = [](const Node& n) {
      const Json j = GetJson(*n.proc, "/cache/metadata");
      return j.is_object() && j["owner_views"]["complete"] == 1;
    };
    ready = WaitFor([&] { return complete(a) && complete(b); });
  }
  EtcdCluster etcd{1};
  const std::string cluster = UniqueCluster();
  Node a;
  Node b;
  bool ready = false;
};

TEST(Drain, ANodeIsDrainedUnderAWorkloadAndNothingIsLost) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  std::vector<Node> nodes;
  for (const char* id : {"a", "b", "c"}) {
    nodes.push_back(StartNode(etcd.endpoints(), cluster, id, {"--dram-size", "128MiB"}));
  }
  ASSERT_TRUE(WaitFor([&] {
    int coordinators = 0;
    for (Node& n : nodes) coordinators += ScrapeMetric(*n.proc, "tierkv_cluster_coordinator") == 1;
    return coordinators == 1;
  }));
  Node* coord = nullptr;
  for (Node& n : nodes) {
    if (ScrapeMetric(*n.proc, "tierkv_cluster_coordinator") == 1) coord = &n;
  }
  ASSERT_NE(coord, nullptr);
  Node& src = nodes[1];  // b
  auto cb = Client::Connect(src.proc->uds());
  ASSERT_TRUE(cb.ok());
  std::vector<std::pair<std::string, size_t>> objs;
  for (int i = 0; i < 200; ++i) {
    objs.emplace_back("d" + std::to_string(i), 100 + static_cast<size_t>(i) * 1500);
    ASSERT_TRUE(
        (*cb)->Put(objs.back().first, PatternValue(objs.back().first, objs.back().second)).ok());
  }
  for (Node& n : nodes) {
    if (&n == &src) continue;
    ASSERT_TRUE(WaitFor([&] {
      return GetJson(*n.proc, "/cache/metadata")["index"]["entries"] == 200;
    })) << n.id;
  }
  // Refusals: not the coordinator, bad input.
  Node& other = coord == &nodes[0] ? nodes[2] : nodes[0];
  const std::string elsewhere = PostText(*other.proc, "/api/v1/drain_jobs", R"({"node":"b"})");
  EXPECT_NE(elsewhere.find("not it"), std::string::npos) << elsewhere;
  // It names where to send it: the coordinator's node id and REST URL.
  EXPECT_NE(elsewhere.find("node " + coord->id + ", " + coord->proc->rest()), std::string::npos)
      << elsewhere;
  EXPECT_NE(PostText(*coord->proc, "/api/v1/drain_jobs", R"({"segment":"rank-x-dram"})")
                .find("rank-<rank>-dram"),
            std::string::npos);
  for (const char* seg : {"rank--1-dram", "rank-+1-dram", "rank-1x-dram", "rank- 1-ssd",
                          "rank-99999999999-dram", "rank-1-hbm", "rank-1"}) {
    const std::string body = std::string("{\"segment\":\"") + seg + "\"}";
    for (Node* n : {coord, &other}) {  // the same answer on every manager
      EXPECT_NE(PostText(*n->proc, "/api/v1/drain_jobs", body).find("rank-<rank>-dram"),
                std::string::npos)
          << seg;
    }
  }
  EXPECT_NE(PostText(*coord->proc, "/api/v1/drain_jobs", "").find("give the segment"),
            std::string::npos);
  EXPECT_NE(PostText(*coord->proc, "/api/v1/drain_jobs", R"({"segment":"rank-0-dram","node":"b"})")
                .find("not both"),
            std::string::npos);
  EXPECT_NE(PostText(*coord->proc, "/api/v1/drain_jobs", R"({"node":"zz"})").find("no live member"),
            std::string::npos);
  EXPECT_NE(PostText(*coord->proc, "/api/v1/drain_jobs", R"({"nod":"b"})").find("unknown"),
            std::string::npos);

  // A workload on b while the drain runs: new puts, and reads of drained keys.
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread workload([&] {
    auto c = Client::Connect(src.proc->uds());
    if (!c.ok()) return ++bad, void();
    std::mt19937 rng(3);
    for (int i = 0; !stop; ++i) {
      const std::string key = "w" + std::to_string(i);
      if (!(*c)->Put(key, PatternValue(key, 2000)).ok()) ++bad;
      const auto& [k, size] = objs[rng() % objs.size()];
      Result<std::string> v = (*c)->Get(k);
      if (!v.ok() || *v != PatternValue(k, size)) ++bad;
      ++reads;
    }
  });
  const std::string started = PostText(*coord->proc, "/api/v1/drain_jobs", R"({"node":"b"})");
  const std::string id = Field(started, "job_id");
  ASSERT_FALSE(id.empty()) << started;
  EXPECT_EQ(started.rfind("job_id=" + id + " state=", 0), 0u) << started;
  const std::string line = AwaitJobEnd(*coord->proc, id, 30000);
  ASSERT_TRUE(!line.empty() && Field(line, "state") != "running") << line;
  ASSERT_TRUE(WaitFor([&] { return reads.load() > 50; }));
  stop = true;
  workload.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(Field(line, "state"), "done") << line;
  EXPECT_EQ(Field(line, "source"), "b");
  const uint64_t total = std::stoull(Field(line, "objects_total"));
  EXPECT_GE(total, 200u) << line;
  EXPECT_EQ(Field(line, "objects_moved"), std::to_string(total)) << line;
  EXPECT_EQ(Field(line, "objects_failed"), "0") << line;
  EXPECT_NE(Field(line, "finished_ms"), "0");
  // The originals left b and live on a or c, byte for byte.
  LookupOptions local;
  local.local_only = true;
  auto ca = Client::Connect(nodes[0].proc->uds());
  auto cc = Client::Connect(nodes[2].proc->uds());
  ASSERT_TRUE(ca.ok() && cc.ok());
  for (const auto& [k, size] : objs) {
    const bool on_a = (*ca)->Exist(k, kDefaultTenant, local).ok();
    const bool on_c = (*cc)->Exist(k, kDefaultTenant, local).ok();
    EXPECT_TRUE(on_a || on_c) << k;
    Result<std::string> v = on_a ? (*ca)->Get(k) : (*cc)->Get(k);
    ASSERT_TRUE(v.ok()) << k;
    EXPECT_TRUE(*v == PatternValue(k, size)) << k;
  }
  // Unknown job; cancel of a finished job answers its summary.
  EXPECT_NE(GetText(*coord->proc, "/api/v1/drain_jobs/query?job_id=job_99").find("no drain job"),
            std::string::npos);
  EXPECT_EQ(Field(PostText(*coord->proc, "/api/v1/drain_jobs/cancel?job_id=" + id, ""), "state"),
            "done");
}

TEST(Drain, DropWaitsUntilTheSourcesViewOfTheTargetCoversItsFence) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  ASSERT_TRUE((*cb)->Put("f1", PatternValue("f1", 5000)).ok());
  const uint64_t gen = ListedGeneration(b, "f1");
  ASSERT_NE(gen, 0u);
  LookupOptions local;
  local.local_only = true;
  // a's fence as of now; b's complete view of a then covers it.
  const Json fence = Json::parse(PostText(*a.proc, "/cache/sync", ""), nullptr, false);
  ASSERT_TRUE(fence.contains("inventory_fence")) << fence.dump();
  const uint64_t seq = fence["inventory_fence"]["sequence"];
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*b.proc, "/cache/metadata")["owner_views"]["complete"] == 1; }));

  // A fence b's view of a has not reached: nothing is removed, and the answer
  // comes before the caller's deadline.
  const auto t0 = std::chrono::steady_clock::now();
  peer::GrantedItem r = DropWithFence(b, "f1", gen, "a", seq + 1000000, 3000);
  EXPECT_NE(r.code(), 0u);
  EXPECT_NE(r.message().find("the copies are kept"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("timeout"), std::string::npos) << r.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // At most 8 Drops wait for fences at once; the others are refused at once.
  std::vector<std::thread> waiters;
  std::atomic<int> refused{0}, timed_out{0};
  for (int i = 0; i < 12; ++i) {
    waiters.emplace_back([&] {
      const peer::GrantedItem w = DropWithFence(b, "f1", gen, "a", seq + 1000000, 3000);
      refused += w.message().find("too many drops awaiting fences") != std::string::npos;
      timed_out += w.message().find("timeout") == 0;
    });
  }
  for (std::thread& t : waiters) t.join();
  EXPECT_GE(refused.load(), 4);
  EXPECT_LE(timed_out.load(), 8);
  EXPECT_EQ(refused + timed_out, 12);
  EXPECT_TRUE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // More than 256 keys in one Pull or Drop: the call is refused.
  {
    auto stub =
        peer::Peer::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
    peer::PullRequest pull;
    peer::DropRequest drop;
    *pull.mutable_caller() = CallerFor(a);
    *drop.mutable_caller() = CallerFor(a);
    for (int i = 0; i < 257; ++i) {
      pull.add_keys("k" + std::to_string(i));
      drop.add_items()->set_key("k" + std::to_string(i));
    }
    grpc::ClientContext pctx, dctx;
    peer::ItemResults out;
    EXPECT_EQ(stub->Pull(&pctx, pull, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(stub->Drop(&dctx, drop, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    // A Pull must name the source and one generation per key.
    peer::PullRequest anonymous;
    *anonymous.mutable_caller() = CallerFor(a);
    anonymous.add_keys("f1");
    grpc::ClientContext actx;
    EXPECT_EQ(stub->Pull(&actx, anonymous, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    anonymous.set_source("b");
    grpc::ClientContext gctx;
    EXPECT_EQ(stub->Pull(&gctx, anonymous, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    // A caller that is not a live member is refused whatever it asks.
    for (peer::PeerCaller* c : {pull.mutable_caller(), drop.mutable_caller()}) {
      c->set_runtime_uuid("made-up");
    }
    grpc::ClientContext fpctx, fdctx, flctx;
    EXPECT_EQ(stub->Pull(&fpctx, pull, &out).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(stub->Drop(&fdctx, drop, &out).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    peer::DrainListRequest list;  // names no caller
    auto reader = stub->DrainList(&flctx, list);
    peer::DrainListResponse page;
    EXPECT_FALSE(reader->Read(&page));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // No fence: refused at once, kept (nothing shows a copy exists elsewhere).
  r = DropWithFence(b, "f1", gen, "", 0, 30000);
  EXPECT_NE(r.message().find("names the fence"), std::string::npos) << r.message();
  EXPECT_TRUE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // A fence of a node that is not a member: refused at once, kept.
  r = DropWithFence(b, "f1", gen, "zz", 1, 30000);
  EXPECT_NE(r.message().find("not a live member"), std::string::npos) << r.message();
  EXPECT_TRUE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // A fence of another incarnation of a (a restarted owner numbers its
  // changes anew), whose sequence a's view here covers: not covered by a view
  // of another incarnation, so refused when the wait ends (within the
  // caller's deadline; an incarnation b never saw may be one it has yet to
  // see), kept.
  const std::string uuid_a = RuntimeUuid(b, "a");
  ASSERT_FALSE(uuid_a.empty());
  r = DropWithFence(b, "f1", gen, "a", seq, 1500, "an-earlier-runtime");
  EXPECT_NE(r.message().find("is of runtime " + uuid_a + ", not of runtime an-earlier-runtime"),
            std::string::npos)
      << r.message();
  EXPECT_NE(r.message().find("the copies are kept"), std::string::npos) << r.message();
  EXPECT_TRUE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // A fence that is covered, of a's runtime: removed.
  r = DropWithFence(b, "f1", gen, "a", seq, 30000, uuid_a);
  EXPECT_EQ(r.code(), 0u) << r.message();
  EXPECT_FALSE((*cb)->Exist("f1", kDefaultTenant, local).ok());
  // Over REST, the same fence owners: covered, unknown.
  EXPECT_NE(PostText(*b.proc, "/cache/metadata/await",
                     R"({"inventory_fence":{"owner":"a","sequence":)" + std::to_string(seq) + "}}")
                .find("covered_sequence"),
            std::string::npos);
  EXPECT_NE(PostText(*b.proc, "/cache/metadata/await",
                     R"({"inventory_fence":{"owner":"zz","sequence":1}})")
                .find("unknown owner"),
            std::string::npos);
  // a restarts (a new incarnation, a later epoch). A fence of an earlier
  // epoch is refused at once, even under a runtime UUID b never saw, kept.
  const uint64_t epoch_a = fence["inventory_fence"].value("epoch", 0u);
  ASSERT_NE(epoch_a, 0u) << fence.dump();
  ASSERT_EQ(a.proc->Stop(SIGTERM), 0);
  a = StartNode(etcd.endpoints(), cluster, "a");
  ASSERT_TRUE(WaitFor([&] {
    const std::string now = RuntimeUuid(b, "a");
    return !now.empty() && now != uuid_a;
  }));
  ASSERT_TRUE((*cb)->Put("f2", PatternValue("f2", 5000)).ok());
  const uint64_t gen2 = ListedGeneration(b, "f2");
  r = DropWithFence(b, "f2", gen2, "a", 1, 30000, "a-runtime-b-never-saw", epoch_a);
  EXPECT_NE(r.message().find("stale fence: runtime a-runtime-b-never-saw of a"), std::string::npos)
      << r.message();
  EXPECT_NE(r.message().find("a now runs epoch " + std::to_string(epoch_a + 1)), std::string::npos)
      << r.message();
  EXPECT_TRUE((*cb)->Exist("f2", kDefaultTenant, local).ok());
}

// Where the target of a drain already holds its own value of a key, either
// value may be the newer one. Neither is replaced and the source keeps its
// value, so no value of a key is lost; a key with the same bytes on both is
// moved.
TEST(Drain, ADifferentValueOnTheTargetIsNeitherReplacedNorDropped) {
  CoordinatorAndB two;
  ASSERT_TRUE(two.ready);
  Node &a = two.a, &b = two.b;
  auto ca = Client::Connect(a.proc->uds());
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(ca.ok() && cb.ok());
  // v1 and v2: the same size, other bytes; v3 another size.
  const std::string v1 = PatternValue("v1", 20000), v2 = PatternValue("v2", 20000);
  const std::string v3 = PatternValue("v3", 30000);
  // `to` sees every change of `from` so far.
  auto await = [&](const Node& from, const Node& to) {
    const Json fence = Json::parse(PostText(*from.proc, "/cache/sync", ""), nullptr, false);
    ASSERT_TRUE(fence.contains("inventory_fence")) << fence.dump();
    const Json body = {{"inventory_fence", fence["inventory_fence"]}, {"timeout_ms", 10000}};
    const std::string got = PostText(*to.proc, "/cache/metadata/await", body.dump());
    ASSERT_NE(got.find("covered_sequence"), std::string::npos) << got;
  };
  // Each manager puts its own value of the same keys (copies fetched from
  // the other would follow their owner and never differ for long): other
  // bytes of the same size, the same bytes, another size.
  ASSERT_TRUE((*cb)->Put("older", v2).ok());
  ASSERT_TRUE((*cb)->Put("same", v2).ok());
  ASSERT_TRUE((*cb)->Put("resized", v3).ok());
  ASSERT_TRUE((*cb)->Put("newer", v1).ok());
  ASSERT_TRUE((*ca)->Put("older", v1).ok());
  ASSERT_TRUE((*ca)->Put("same", v2).ok());
  ASSERT_TRUE((*ca)->Put("resized", v1).ok());
  ASSERT_TRUE((*ca)->Put("newer", v2).ok());
  await(b, a);
  await(a, b);

  const std::string id =
      Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"b"})"), "job_id");
  ASSERT_FALSE(id.empty());
  const std::string line = AwaitJobEnd(*a.proc, id, 60000);
  EXPECT_EQ(Field(line, "state"), "done") << line;
  EXPECT_EQ(Field(line, "objects_total"), "4") << line;
  EXPECT_EQ(Field(line, "objects_moved"), "1") << line;
  EXPECT_EQ(Field(line, "objects_failed"), "3") << line;
  LookupOptions local;
  local.local_only = true;
  auto local_value = [&](std::unique_ptr<Client>& c, const std::string& key) {
    std::string v(64 << 10, '\0');
    Result<ObjectInfo> info = c->Query(key, kDefaultTenant, local);
    if (!info.ok()) return std::string("(not here)");
    Result<size_t> n = c->Get(key, v.data(), v.size());
    return n.ok() ? v.substr(0, *n) : std::string("(not here)");
  };
  // Each value of a key whose values differ is still where it was.
  EXPECT_TRUE(local_value(*cb, "older") == v2);
  EXPECT_TRUE(local_value(*ca, "older") == v1);
  EXPECT_TRUE(local_value(*cb, "resized") == v3);
  EXPECT_TRUE(local_value(*ca, "resized") == v1);
  EXPECT_TRUE(local_value(*cb, "newer") == v1);
  EXPECT_TRUE(local_value(*ca, "newer") == v2);
  // The key with the same bytes on both moved: the source no longer holds it.
  EXPECT_FALSE((*cb)->Exist("same", kDefaultTenant, local).ok());
  Result<std::string> same = (*cb)->Get("same");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(*same == v2);
}

// A value removed or replaced on the source after it was listed is no longer
// the source's to move: Pull and Drop answer it as gone (NOT_FOUND), and a
// job counts it neither as moved nor as failed. A value listed a moment ago
// is pulled although the target's view may lag: Pull waits for the view to
// reach the listing. Without that coverage a missing value is not called
// gone.
TEST(Drain, AValueGoneFromTheSourceSinceItWasListedIsNeitherMovedNorFailed) {
  CoordinatorAndB two;
  ASSERT_TRUE(two.ready);
  Node &a = two.a, &b = two.b;
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  auto sequence_of = [](const Node& n) -> uint64_t {
    const Json fence = Json::parse(PostText(*n.proc, "/cache/sync", ""), nullptr, false);
    return fence.contains("inventory_fence") ? fence["inventory_fence"].value("sequence", 0ull) : 0;
  };
  for (const char* k : {"removed", "replaced", "kept"}) {
    ASSERT_TRUE((*cb)->Put(k, PatternValue(k, 3000)).ok());
  }
  const std::string uuid_b = RuntimeUuid(a, "b");
  ASSERT_FALSE(uuid_b.empty());
  const uint64_t removed = ListedGeneration(b, "removed");
  const uint64_t replaced = ListedGeneration(b, "replaced");
  const uint64_t kept = ListedGeneration(b, "kept");
  ASSERT_TRUE((*cb)->Remove("removed").ok());
  ASSERT_TRUE((*cb)->Upsert("replaced", PatternValue("replaced2", 3000)).ok());

  // Values put a moment before their Pull, each pulled at once.
  std::vector<std::string> keys = {"removed", "replaced", "kept"};
  std::vector<uint64_t> gens = {removed, replaced, kept};
  for (int i = 0; i < 20; ++i) {
    keys.push_back("fresh" + std::to_string(i));
    ASSERT_TRUE((*cb)->Put(keys.back(), PatternValue(keys.back(), 2000)).ok());
    gens.push_back(ListedGeneration(b, keys.back()));
  }
  peer::ItemResults pulled = PullOn(a, "b", uuid_b, keys, gens, sequence_of(b), 30000);
  ASSERT_EQ(pulled.items_size(), static_cast<int>(keys.size()));
  EXPECT_EQ(pulled.fence().owner(), "a");
  EXPECT_EQ(pulled.fence().owner_uuid(), RuntimeUuid(b, "a"));
  EXPECT_GT(pulled.fence().epoch(), 0u);  // the incarnation's epoch rides along
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(pulled.items(i).code(), static_cast<uint32_t>(Code::kNotFound)) << keys[i];
    EXPECT_TRUE(pulled.items(i).gone()) << keys[i] << ": " << pulled.items(i).message();
  }
  for (int i = 2; i < pulled.items_size(); ++i) {
    EXPECT_EQ(pulled.items(i).code(), 0u) << keys[i] << ": " << pulled.items(i).message();
    EXPECT_FALSE(pulled.items(i).gone()) << keys[i];
  }
  // A listing of another incarnation of b: a's view of this one cannot tell.
  peer::ItemResults other =
      PullOn(a, "b", "another-runtime", {"removed"}, {removed}, sequence_of(b), 30000);
  ASSERT_EQ(other.items_size(), 1);
  EXPECT_EQ(other.items(0).code(), static_cast<uint32_t>(Code::kNotFound));
  EXPECT_FALSE(other.items(0).gone()) << other.items(0).message();
  // A listing a's view has not reached: the answer comes within the caller's
  // deadline, and a value a does not show is not called gone.
  peer::ItemResults ahead =
      PullOn(a, "b", uuid_b, {"removed"}, {removed}, sequence_of(b) + 1000000, 3000);
  ASSERT_EQ(ahead.items_size(), 1);
  EXPECT_NE(ahead.items(0).code(), 0u);
  EXPECT_FALSE(ahead.items(0).gone()) << ahead.items(0).message();

  // A target whose scope is one namespace cannot tell a value gone from one
  // out of its scope: it never calls a value gone.
  Node c = StartNode(two.etcd.endpoints(), two.cluster, "c",
                     {"--metadata-namespace", "tierkv:v1:" + std::string(64, '1')});
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*c.proc, "/cache/metadata")["coverage"] == "complete"; }));
  peer::ItemResults scoped = PullOn(c, "b", uuid_b, {"removed"}, {removed}, sequence_of(b), 30000);
  ASSERT_EQ(scoped.items_size(), 1);
  EXPECT_EQ(scoped.items(0).code(), static_cast<uint32_t>(Code::kNotFound));
  EXPECT_FALSE(scoped.items(0).gone()) << scoped.items(0).message();

  // Drop: "replaced" at its listed generation is gone; "kept" is removed.
  peer::GrantedItem r =
      DropWithFence(b, "replaced", replaced, "a", pulled.fence().sequence(), 30000);
  EXPECT_EQ(r.code(), static_cast<uint32_t>(Code::kNotFound)) << r.message();
  EXPECT_TRUE(r.gone()) << r.message();
  r = DropWithFence(b, "kept", kept, "a", pulled.fence().sequence(), 30000);
  EXPECT_EQ(r.code(), 0u) << r.message();
  EXPECT_FALSE(r.gone());

  // A job while clients remove and replace values on b: whatever it lists and
  // finds gone leaves its total, so total = moved + failed, and no value
  // another manager does not hold is counted failed.
  for (int i = 0; i < 300; ++i) {
    const std::string k = "j" + std::to_string(i);
    ASSERT_TRUE((*cb)->Put(k, PatternValue(k, 4000)).ok());
  }
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    auto c = Client::Connect(b.proc->uds());
    if (!c.ok()) return;
    for (int i = 0; !stop; i = (i + 7) % 300) {
      const std::string k = "j" + std::to_string(i);
      if (i % 2 == 0) {
        (void)(*c)->Remove(k);
      } else {
        (void)(*c)->Upsert(k, PatternValue(k + "x", 4000));
      }
    }
  });
  const std::string id =
      Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"b"})"), "job_id");
  ASSERT_FALSE(id.empty());
  const std::string line = AwaitJobEnd(*a.proc, id, 60000);
  stop = true;
  churn.join();
  EXPECT_EQ(Field(line, "state"), "done") << line;
  const uint64_t total = std::stoull(Field(line, "objects_total"));
  EXPECT_EQ(std::stoull(Field(line, "objects_moved")) + std::stoull(Field(line, "objects_failed")),
            total)
      << line;
  EXPECT_EQ(Field(line, "objects_failed"), "0") << line;
  // The coordinator's metrics count the job and its objects as its summary.
  auto metric = [&](const std::string& series) { return ScrapeMetric(*a.proc, series); };
  EXPECT_EQ(metric("tierkv_drain_jobs_running"), 0);
  EXPECT_EQ(metric("tierkv_drain_jobs_total{state=\"done\"}"), 1);
  EXPECT_EQ(metric("tierkv_drain_jobs_total{state=\"failed\"}"), 0);
  EXPECT_EQ(metric("tierkv_drain_objects_total{outcome=\"moved\"}"),
            std::stoll(Field(line, "objects_moved")));
  EXPECT_EQ(metric("tierkv_drain_objects_total{outcome=\"failed\"}"), 0);
  EXPECT_EQ(metric("tierkv_drain_bytes_moved_total"), std::stoll(Field(line, "bytes_moved")));
}

// Job ids are numbered in etcd: after the coordinator changes, the new one
// numbers on from the last job of the old one, so a job id never names
// another coordinator's job.
TEST(Drain, JobIdsStayUniqueWhenTheCoordinatorChanges) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartCoordinator(etcd.endpoints(), cluster);
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  Node c = StartNode(etcd.endpoints(), cluster, "c");
  auto cc = Client::Connect(c.proc->uds());
  ASSERT_TRUE(cc.ok());
  ASSERT_TRUE((*cc)->Put("x", PatternValue("x", 1000)).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    const std::string id =
        Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"c"})"), "job_id");
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(Field(AwaitJobEnd(*a.proc, id, 30000), "state"), "done");
    ids.push_back(id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"job_1", "job_2"}));
  // a leaves; b takes over and numbers on.
  EXPECT_EQ(a.proc->Stop(SIGTERM), 0);
  ASSERT_TRUE(
      WaitFor([&] { return ScrapeMetric(*b.proc, "tierkv_cluster_coordinator") == 1; }, 20000));
  EXPECT_NE(GetText(*b.proc, "/api/v1/drain_jobs/query?job_id=job_1").find("no drain job"),
            std::string::npos);
  const std::string next =
      Field(PostText(*b.proc, "/api/v1/drain_jobs", R"({"node":"c"})"), "job_id");
  EXPECT_EQ(next, "job_3");
  EXPECT_EQ(Field(AwaitJobEnd(*b.proc, next, 30000), "state"), "done");
}

// An object with a replica in DRAM and one on SSD is listed twice, one record
// after the other, and the coordinator moves it once, also where its two
// records fall in two pages (the coordinator reads and moves one page at a
// time). 6000 objects on SSD, every other one also back in DRAM: 9000
// records in 9 pages, with the pairs in hash order, so pairs are split
// across page boundaries (the test counts them).
TEST(Drain, AnObjectInDramAndOnSsdIsMovedOnceWhereverItsRecordsFall) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  Node a = StartCoordinator(etcd.endpoints(), cluster, {"--dram-size", "128MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b",
                     {"--ssd-dir", dir.path + "/ssd", "--ssd-size", "256MiB"});
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  constexpr int kObjects = 6000;
  std::vector<std::string> keys;
  for (int i = 0; i < kObjects; ++i) keys.push_back("s" + std::to_string(i));
  Json evict = {{"chunk_hashes", keys}, {"locations", {"ssd"}}};
  for (int at = 0; at < kObjects; at += 500) {
    std::vector<std::string> values;
    std::vector<PutItem> items;
    for (int i = at; i < at + 500; ++i) values.push_back(PatternValue(keys[i], 1000));
    for (int i = at; i < at + 500; ++i) {
      items.push_back({keys[i], values[i - at].data(), values[i - at].size(), ""});
    }
    for (const Status& st : (*cb)->BatchPut(items)) ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_NE(PostText(*b.proc, "/memory/evict", evict.dump()), "");
  LookupOptions local;
  local.local_only = true;
  auto media_of = [&](int i) {
    Result<ObjectInfo> q = (*cb)->Query(keys[i], kDefaultTenant, local);
    return q.ok() ? q->media : 0u;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < kObjects; i += 97) {
          if (media_of(i) != MediumBit(Medium::kSsd)) return false;
        }
        return ScrapeMetric(*b.proc, "tierkv_ssd_objects") == kObjects;
      },
      60000));
  for (int at = 0; at < kObjects; at += 200) {  // every other one back in DRAM
    std::vector<std::string_view> half;
    for (int i = at; i < at + 200; i += 2) half.push_back(keys[i]);
    for (const auto& got : (*cb)->BatchGet(half)) ASSERT_TRUE(got.ok()) << got.status().ToString();
  }
  ASSERT_EQ(media_of(0), MediumBit(Medium::kDram) | MediumBit(Medium::kSsd));
  // The listing as the coordinator gets it: pairs split across pages.
  {
    auto stub =
        peer::Peer::NewStub(grpc::CreateChannel(b.addr, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    peer::DrainListRequest req;
    req.set_medium(255);
    *req.mutable_caller() = CallerFor(b);
    auto reader = stub->DrainList(&ctx, req);
    size_t records = 0, split = 0;
    std::string last;
    for (peer::DrainListResponse page; reader->Read(&page);) {
      if (page.records_size() > 0 && page.records(0).key() == last) ++split;
      records += page.records_size();
      if (page.records_size() > 0) last = page.records(page.records_size() - 1).key();
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_EQ(records, kObjects + kObjects / 2);
    std::printf("pairs split across pages: %zu\n", split);
  }
  const std::string id =
      Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"b"})"), "job_id");
  ASSERT_FALSE(id.empty());
  const std::string line = AwaitJobEnd(*a.proc, id, 120000);
  EXPECT_EQ(Field(line, "state"), "done") << line;
  EXPECT_EQ(Field(line, "objects_total"), std::to_string(kObjects)) << line;
  EXPECT_EQ(Field(line, "objects_moved"), std::to_string(kObjects)) << line;
  EXPECT_EQ(Field(line, "objects_failed"), "0") << line;
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  for (int i = 0; i < kObjects; i += 13) {
    Result<std::string> v = (*ca)->Get(keys[i]);
    ASSERT_TRUE(v.ok()) << keys[i] << ": " << v.status().ToString();
    EXPECT_TRUE(*v == PatternValue(keys[i], 1000)) << keys[i];
  }
}

// A node whose listing is larger than one gRPC message may be (4 MiB by
// default): 6000 objects with keys of 1000 bytes, the last 100 of them of
// 100 000 bytes in a tenant of their own (a batch of 64 of those would make a
// Pull of 6 MB), list as about 16 MB; every one of them is moved.
TEST(Drain, AListingLargerThanOneMessageIsDrainedWhole) {
  CoordinatorAndB two({"--dram-size", "256MiB", "--max-key-bytes", "131072"});
  ASSERT_TRUE(two.ready);
  Node &a = two.a, &b = two.b;
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  constexpr int kObjects = 6000;
  auto longest = [](int i) { return i >= kObjects - 100; };
  auto key = [&](int i) {
    std::string k = "long-" + std::to_string(i) + "-";
    k.resize(longest(i) ? 100000 : 1000, 'k');
    return k;
  };
  auto tenant = [&](int i) { return std::string(longest(i) ? "longest" : kDefaultTenant); };
  for (int at = 0; at < kObjects; at += 100) {
    std::vector<std::string> keys, values;
    for (int i = at; i < at + 100; ++i) {
      keys.push_back(key(i));
      values.push_back("v" + std::to_string(i));
    }
    std::vector<PutItem> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      items.push_back({keys[i], values[i].data(), values[i].size(), ""});
    }
    for (const Status& st : (*cb)->BatchPut(items, tenant(at))) {
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
  }
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*a.proc, "/cache/metadata")["index"]["entries"] == kObjects; }));
  const std::string id =
      Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"b"})"), "job_id");
  ASSERT_FALSE(id.empty());
  const std::string line = AwaitJobEnd(*a.proc, id, 120000);
  ASSERT_TRUE(!line.empty() && Field(line, "state") != "running") << line;
  EXPECT_EQ(Field(line, "state"), "done") << line;
  EXPECT_EQ(Field(line, "objects_total"), std::to_string(kObjects)) << line;
  EXPECT_EQ(Field(line, "objects_moved"), std::to_string(kObjects)) << line;
  EXPECT_EQ(Field(line, "objects_failed"), "0") << line;
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  LookupOptions local;
  local.local_only = true;
  for (int i = 0; i < kObjects; i += longest(i) ? 1 : 7) {
    Result<std::string> v = (*ca)->Get(key(i), tenant(i));
    ASSERT_TRUE(v.ok()) << i << ": " << v.status().ToString();
    EXPECT_EQ(*v, "v" + std::to_string(i));
    EXPECT_FALSE((*cb)->Exist(key(i), tenant(i), local).ok()) << i;
  }
}

TEST(Drain, CancelStopsAJobBetweenBatches) {
  CoordinatorAndB two({"--dram-size", "512MiB"});
  ASSERT_TRUE(two.ready);
  Node &a = two.a, &b = two.b;
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  const std::string big(512 << 10, 'x');
  for (int i = 0; i < 640; ++i) ASSERT_TRUE((*ca)->Put("k" + std::to_string(i), big).ok());
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*b.proc, "/cache/metadata")["index"]["entries"] == 640; }));
  const std::string id =
      Field(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"a"})"), "job_id");
  ASSERT_FALSE(id.empty());
  EXPECT_NE(PostText(*a.proc, "/api/v1/drain_jobs", R"({"node":"a"})").find("is running"),
            std::string::npos);
  PostText(*a.proc, "/api/v1/drain_jobs/cancel?job_id=" + id, "");
  const std::string line = AwaitJobEnd(*a.proc, id, 30000);
  ASSERT_TRUE(!line.empty() && Field(line, "state") != "running") << line;
  EXPECT_EQ(Field(line, "state"), "cancelled") << line;
  const uint64_t moved = std::stoull(Field(line, "objects_moved"));
  EXPECT_LT(moved, 640u) << line;
  // What was moved is on b; what was not is still on a.
  LookupOptions local;
  local.local_only = true;
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  uint64_t on_a = 0, on_b = 0;
  for (int i = 0; i < 640; ++i) {
    const std::string k = "k" + std::to_string(i);
    on_a += (*ca)->Exist(k, kDefaultTenant, local).ok();
    on_b += (*cb)->Exist(k, kDefaultTenant, local).ok();
  }
  EXPECT_EQ(on_a, 640u - moved);
  EXPECT_GE(on_b, moved);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_drain_jobs_total{state=\"cancelled\"}"), 1);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_drain_jobs_total{state=\"done\"}"), 0);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_drain_objects_total{outcome=\"moved\"}"),
            static_cast<int64_t>(moved));
}

}  // namespace
}  // namespace tierkv
