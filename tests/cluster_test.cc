// Cluster membership with real etcd and real manager processes: identity and
// epochs, format checks, member loss, coordinator failover, etcd member and
// quorum loss, partitions through a fault proxy, graceful leave, and /metadata
// shared through etcd.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster_util.h"
#include "fault_proxy.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::FaultProxy;
using testing::WaitFor;

TEST(Cluster, ManagersFindEachOtherAndAgreeOnOneCoordinator) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "node-a");
  Node b = StartNode(etcd.endpoints(), cluster, "node-b");
  const std::set<std::string> both = {"node-a", "node-b"};
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*a.proc) == both && MemberIds(*b.proc) == both; }));

  Json members = GetJson(*a.proc, "/cluster/members");
  EXPECT_EQ(members["mode"], "cluster");
  EXPECT_EQ(members["cluster"], cluster);
  std::set<uint32_t> ranks;
  for (const auto& m : members["members"]) {
    ranks.insert(m["rank"].get<uint32_t>());
    EXPECT_EQ(m["epoch"], 1);
    EXPECT_EQ(m["incarnation"], 1);
    EXPECT_EQ(m["endpoint"], m["node_id"] == "node-a" ? a.addr : b.addr);
    EXPECT_FALSE(m["runtime_uuid"].get<std::string>().empty());
    EXPECT_EQ(m["stream_protocol"], "tierkv/inventory-stream/v1");
    EXPECT_GT(m["since_ms"].get<int64_t>(), 0);
  }
  EXPECT_EQ(ranks, (std::set<uint32_t>{0, 1}));  // the lowest free ranks, distinct

  // Exactly one coordinator, and both name the same one.
  ASSERT_TRUE(WaitFor([&] {
    return GetJson(*a.proc, "/leader")["present"] == true &&
           GetJson(*a.proc, "/leader")["leader_address"] ==
               GetJson(*b.proc, "/leader")["leader_address"];
  }));
  const std::string ra = GetText(*a.proc, "/role"), rb = GetText(*b.proc, "/role");
  EXPECT_TRUE((ra == "leader" && rb == "standby") || (ra == "standby" && rb == "leader"))
      << ra << " " << rb;
  const std::string leader_addr = GetJson(*a.proc, "/leader")["leader_address"];
  EXPECT_EQ(leader_addr, ra == "leader" ? a.addr : b.addr);
  Json health = GetJson(*b.proc, "/health");
  EXPECT_EQ(health["ha_state"], "serving");
  EXPECT_EQ(health["service_ready"], true);
  EXPECT_GT(health["view_version"].get<uint64_t>(), 0u);
  EXPECT_EQ(GetText(*a.proc, "/ha_status"), "serving");
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_members"), 2);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_registered"), 1);

  // The CLI lists both.
  std::string out, err;
  ASSERT_EQ(
      testing::RunCommand({TIERKV_CLI_BIN, "--rest", a.proc->rest(), "members"}, "", &out, &err), 0)
      << err;
  EXPECT_NE(out.find("node-a"), std::string::npos) << out;
  EXPECT_NE(out.find("node-b"), std::string::npos) << out;
}

TEST(Cluster, ALiveNodeIdIsRefusedAndRestartAdvancesEpochAndIncarnation) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "same");
  const Json first = GetJson(*a.proc, "/cluster/members")["members"][0];

  std::string err;
  const std::string other = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  EXPECT_EQ(testing::RunServerExpectingFailure(
                NodeArgs(etcd.endpoints(), cluster, "same", other,
                         {"--uds-path", "/tmp/tierkv-dup-" + std::to_string(getpid()) + ".sock",
                          "--listen", "", "--metrics-url", "http://127.0.0.1:0"}),
                &err),
            2);
  EXPECT_NE(err.find("already has a live member"), std::string::npos) << err;
  // The live member is untouched.
  EXPECT_EQ(GetJson(*a.proc, "/cluster/members")["members"][0]["runtime_uuid"],
            first["runtime_uuid"]);
  EXPECT_EQ(GetText(*a.proc, "/ha_status"), "serving");

  // Graceful stop: exit 0 and the member record is gone from etcd.
  auto kv = EtcdFor(etcd);
  const std::string member_key = "/tierkv/v1/" + cluster + "/members/same";
  auto keys = [&] {
    auto r = kv->Get(member_key);
    return r.ok() ? static_cast<int>(r->kvs.size()) : -1;
  };
  ASSERT_EQ(keys(), 1);
  EXPECT_EQ(a.proc->Stop(SIGTERM), 0);
  EXPECT_EQ(keys(), 0);

  Node again = StartNode(etcd.endpoints(), cluster, "same");
  const Json second = GetJson(*again.proc, "/cluster/members")["members"][0];
  EXPECT_EQ(second["epoch"], 2);
  EXPECT_EQ(second["incarnation"], 2);
  EXPECT_NE(second["runtime_uuid"], first["runtime_uuid"]);
  EXPECT_EQ(second["rank"], first["rank"]);  // the rank stays with the node id

  // A rank held by another node id is refused.
  const std::string rank = std::to_string(first["rank"].get<uint32_t>());
  EXPECT_EQ(testing::RunServerExpectingFailure(
                NodeArgs(etcd.endpoints(), cluster, "other", other,
                         {"--rank", rank, "--uds-path",
                          "/tmp/tierkv-rank-" + std::to_string(getpid()) + ".sock", "--listen", "",
                          "--metrics-url", "http://127.0.0.1:0"}),
                &err),
            2);
  EXPECT_NE(err.find("rank " + rank + " belongs to node same"), std::string::npos) << err;
}

TEST(Cluster, AMismatchedFormatIsRefusedNamingBothVersions) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  auto kv = EtcdFor(etcd);
  ASSERT_TRUE(kv->Put("/tierkv/v1/" + cluster + "/format",
                      R"({"stream_protocol":"tierkv/inventory-stream/v0","cluster_uuid":"x"})")
                  .ok());
  std::string err;
  const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  EXPECT_EQ(testing::RunServerExpectingFailure(
                NodeArgs(etcd.endpoints(), cluster, "n", addr,
                         {"--uds-path", "/tmp/tierkv-fmt-" + std::to_string(getpid()) + ".sock",
                          "--listen", "", "--metrics-url", "http://127.0.0.1:0"}),
                &err),
            2);
  EXPECT_NE(err.find("tierkv/inventory-stream/v0"), std::string::npos) << err;
  EXPECT_NE(err.find("tierkv/inventory-stream/v1"), std::string::npos) << err;
  auto members = kv->Get("/tierkv/v1/" + cluster + "/members/", true);
  ASSERT_TRUE(members.ok());
  EXPECT_TRUE(members->kvs.empty());
}

// A peer port someone else holds stops the start, naming the flag and the
// address, and leaves no member behind; the test harness reports what the
// manager printed (StartNode tries such a start again on another port).
TEST(Cluster, APeerPortInUseStopsTheStartNamingIt) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  asio::io_context io;
  asio::ip::tcp::acceptor taken(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::string addr = "127.0.0.1:" + std::to_string(taken.local_endpoint().port());
  std::string why;
  EXPECT_EQ(ManagerProcess::TryStart(NodeArgs(etcd.endpoints(), cluster, "n", addr), &why),
            nullptr);
  EXPECT_NE(why.find("cannot listen on --addr " + addr), std::string::npos) << why;
  auto kv = EtcdFor(etcd);
  auto members = kv->Get("/tierkv/v1/" + cluster + "/members/", true);
  ASSERT_TRUE(members.ok());
  EXPECT_TRUE(members->kvs.empty());
}

TEST(Cluster, AKilledManagerDisappearsWithinTheTtlAndTheCoordinatorFailsOver) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  std::vector<Node> nodes;
  for (const char* id : {"n0", "n1", "n2"})
    nodes.push_back(StartNode(etcd.endpoints(), cluster, id));
  const std::set<std::string> all = {"n0", "n1", "n2"};
  ASSERT_TRUE(WaitFor([&] {
    for (auto& n : nodes) {
      if (MemberIds(*n.proc) != all) return false;
    }
    return true;
  }));
  size_t leader = nodes.size();
  ASSERT_TRUE(WaitFor([&] {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (GetText(*nodes[i].proc, "/role") == "leader") leader = i;
    }
    return leader < nodes.size();
  }));
  const auto killed_at = std::chrono::steady_clock::now();
  nodes[leader].proc->Stop(SIGKILL);
  std::vector<Node*> alive;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i != leader) alive.push_back(&nodes[i]);
  }
  // Gone from every survivor's list within the TTL (plus scheduling slack).
  ASSERT_TRUE(WaitFor(
      [&] {
        for (Node* n : alive) {
          if (MemberIds(*n->proc).count(nodes[leader].id) != 0) return false;
        }
        return true;
      },
      (kTtl + 2) * 1000));
  // A new coordinator among the survivors within two TTLs, named alike by both.
  ASSERT_TRUE(WaitFor(
      [&] {
        int leaders = 0;
        for (Node* n : alive) leaders += GetText(*n->proc, "/role") == "leader";
        const Json l0 = GetJson(*alive[0]->proc, "/leader");
        const Json l1 = GetJson(*alive[1]->proc, "/leader");
        return leaders == 1 && l0["present"] == true &&
               l0["leader_address"] == l1["leader_address"];
      },
      2 * kTtl * 1000));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(2 * kTtl + 1));
  const std::string addr = GetJson(*alive[0]->proc, "/leader")["leader_address"];
  EXPECT_TRUE(addr == alive[0]->addr || addr == alive[1]->addr) << addr;
}

TEST(Cluster, LosingOneEtcdMemberWithQuorumKeptGoesUnnoticed) {
  EtcdCluster etcd(3);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {}, kTtl3);
  ASSERT_EQ(GetText(*a.proc, "/ha_status"), "serving");
  etcd.Kill(0);  // the first endpoint: the one in use
  // Several keepalive periods later the registration is still valid.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kTtl3);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(GetText(*a.proc, "/ha_status"), "serving");
    ASSERT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_fenced"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(MemberIds(*a.proc), std::set<std::string>{"a"});
  // /metadata (kept in etcd) still works through the survivors.
  httplib::Client http(a.proc->rest());
  auto put = http.Put("/metadata?key=k", "v", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->body, "metadata updated");
}

// This manager's record as its own member list shows it (null when absent).
Json SelfRecord(const ManagerProcess& m, const std::string& id) {
  const Json members = GetJson(m, "/cluster/members");
  for (const Json& e : members.value("members", Json::array())) {
    if (e.value("node_id", "") == id) return e;
  }
  return Json();
}

TEST(Cluster, QuorumLossFencesThenANewIncarnationJoinsKeepingTheContents) {
  EtcdCluster etcd(3);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {}, kTtl3);
  Node b = StartNode(etcd.endpoints(), cluster, "b", {}, kTtl3);
  ASSERT_TRUE(LocalRoundTrip(*a.proc, "before").ok());
  ASSERT_TRUE(WaitFor([&] { return !SelfRecord(*a.proc, "a").is_null(); }));
  const Json first = SelfRecord(*a.proc, "a");
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  ASSERT_TRUE(WaitFor([&] { return (*cb)->Exist("before").ok(); }));
  etcd.Kill(1);
  etcd.Kill(2);  // no quorum: updates and keepalives stop
  ASSERT_TRUE(
      WaitFor([&] { return GetText(*a.proc, "/ha_status") == "standby"; }, 2 * kTtl3 * 1000));
  Json health = GetJson(*a.proc, "/health");
  EXPECT_EQ(health["role"], "unknown");
  EXPECT_EQ(health["service_ready"], true);
  EXPECT_EQ(GetJson(*a.proc, "/leader")["present"], false);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_fenced"), 1);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_registered"), 0);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_membership_state{state=\"fenced\"}"), 1);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_membership_fences_total"), 1);
  // Local DRAM service goes on, old objects included.
  EXPECT_TRUE(LocalRoundTrip(*a.proc, "after").ok());
  // Quorum back: the fenced registration is not revived; a new incarnation
  // of the same process registers (a new runtime UUID, the next epoch).
  etcd.Restart(1);
  etcd.Restart(2);
  ASSERT_TRUE(WaitFor([&] { return etcd.Healthy(0) && etcd.Healthy(1); }, 20000));
  ASSERT_TRUE(
      WaitFor([&] { return GetText(*a.proc, "/ha_status") == "serving"; }, 3 * kTtl3 * 1000));
  ASSERT_TRUE(WaitFor([&] {
    const Json now = SelfRecord(*a.proc, "a");
    return !now.is_null() && now["runtime_uuid"] != first["runtime_uuid"];
  }));
  const Json second = SelfRecord(*a.proc, "a");
  EXPECT_EQ(second["epoch"].get<uint64_t>(), first["epoch"].get<uint64_t>() + 1);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_membership_rejoins_total"), 1);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_membership_state{state=\"registered\"}"), 1);
  EXPECT_GT(testing::ScrapeMetric(*a.proc, "tierkv_membership_last_rejoin_timestamp_seconds"), 0);
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_cluster_fenced"), 0);
  // DRAM contents kept, and the other manager reads them remotely again.
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  EXPECT_TRUE((*ca)->Get("before").ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        Result<std::string> v = (*cb)->Get("after");
        return v.ok() && *v == std::string(4096, 'v');
      },
      3 * kTtl3 * 1000));
  // Each manager's view of the other is the new incarnation's, and follows
  // it: a fence taken on one now is covered by the other.
  for (auto [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const Json fence = Json::parse(PostText(*from->proc, "/cache/sync", ""), nullptr, false);
    ASSERT_TRUE(fence.contains("inventory_fence")) << fence.dump();
    const Json body = {{"inventory_fence", fence["inventory_fence"]}, {"timeout_ms", 10000}};
    const std::string got = PostText(*to->proc, "/cache/metadata/await", body.dump());
    EXPECT_NE(got.find("\"success\":true"), std::string::npos) << got;
  }
  EXPECT_EQ(a.proc->Stop(SIGTERM), 0);
}

TEST(Cluster, APartitionFromEtcdFencesThatManagerOnlyBlackholeAndReset) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  FaultProxy to_a(etcd.client_addr(0));
  FaultProxy to_c(etcd.client_addr(0));
  Node a = StartNode(to_a.addr(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  Node c = StartNode(to_c.addr(), cluster, "c", {"--on-fence", "exit"});
  const std::set<std::string> all = {"a", "b", "c"};
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*b.proc) == all; }));

  to_a.SetMode(FaultProxy::Mode::kBlackhole);
  to_c.SetMode(FaultProxy::Mode::kReset);
  for (Node* n : {&a, &c}) {
    ASSERT_TRUE(
        WaitFor([&] { return GetText(*n->proc, "/ha_status") == "standby"; }, 4 * kTtl * 1000))
        << n->id;
    EXPECT_TRUE(LocalRoundTrip(*n->proc, "k").ok()) << n->id;
  }
  // The others lose them when their leases expire; b itself is untouched.
  ASSERT_TRUE(
      WaitFor([&] { return MemberIds(*b.proc) == std::set<std::string>{"b"}; }, 3 * kTtl * 1000));
  EXPECT_EQ(GetText(*b.proc, "/ha_status"), "serving");
  // b wins the coordinator's election once the fenced leader's election key
  // has expired too, which may come a little after their membership keys.
  EXPECT_TRUE(WaitFor([&] { return GetText(*b.proc, "/role") == "leader"; }, 3 * kTtl * 1000));
  // Healing the partition does not revive the fenced registrations: a joins
  // again as a new incarnation; c, started with --on-fence exit, exited with
  // status 3 for its supervisor to restart it.
  to_a.SetMode(FaultProxy::Mode::kPass);
  to_c.SetMode(FaultProxy::Mode::kPass);
  EXPECT_TRUE(WaitFor(
      [&] {
        return MemberIds(*b.proc) == std::set<std::string>{"a", "b"};
      },
      4 * kTtl * 1000));
  // a learns it is registered again a moment after b sees it.
  EXPECT_TRUE(
      WaitFor([&] { return GetText(*a.proc, "/ha_status") == "serving"; }, 4 * kTtl * 1000));
  EXPECT_EQ(testing::ScrapeMetric(*a.proc, "tierkv_membership_rejoins_total"), 1);
  EXPECT_EQ(c.proc->Stop(SIGTERM), 3);
}

// Opens a TCP connection to "127.0.0.1:PORT" and sends nothing; -1 on failure.
int DialSilently(const std::string& addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(Cluster, AnIdleFloodOnThePeerPortIsShedAndANewMemberStillReadsRemotely) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--peer-max-connections", "64"});
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE((*ca)->Put("k", std::string(4096, 'v')).ok());
  std::vector<int> flood;
  for (int i = 0; i < 600; ++i) {
    const int fd = DialSilently(a.addr);
    ASSERT_GE(fd, 0) << i;
    flood.push_back(fd);
  }
  ASSERT_TRUE(WaitFor([&] {
    return testing::ScrapeMetric(*a.proc, "tierkv_peer_connections_total{result=\"shed\"}") >=
           600 - 64;
  }));
  EXPECT_LE(testing::ScrapeMetric(*a.proc, "tierkv_peer_connections"), 64);
  // A member that joins now completes its view of a and reads from it.
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  ASSERT_TRUE(WaitFor([&] { return (*cb)->Exist("k").ok(); }));
  Result<std::string> v = (*cb)->Get("k");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, std::string(4096, 'v'));
  // The silent ones left are closed at the handshake deadline (5 s).
  EXPECT_TRUE(WaitFor([&] {
    return testing::ScrapeMetric(
               *a.proc, "tierkv_peer_connections_total{result=\"handshake_timeout\"}") >= 1;
  }));
  for (int fd : flood) close(fd);
  EXPECT_TRUE(
      WaitFor([&] { return testing::ScrapeMetric(*a.proc, "tierkv_peer_connections") <= 8; }));
  // That the silent ones never reached the gRPC server (and so held none of
  // its memory) is PeerGate's unit test: its backend saw one connection.
}

TEST(Cluster, MetadataIsSharedThroughEtcdWithTheContractsAnswers) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--metrics-max-body", "4MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  httplib::Client ha(a.proc->rest()), hb(b.proc->rest());
  auto put = ha.Put("/metadata?key=model", "llama", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->body, "metadata updated");
  auto got = hb.Get("/metadata?key=model");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->body, "llama");
  auto del = hb.Delete("/metadata?key=model");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->body, "metadata deleted");
  auto gone = Json::parse(ha.Get("/metadata?key=model")->body, nullptr, false);
  EXPECT_EQ(gone["success"], false);
  EXPECT_EQ(gone["error_message"], "metadata key 'model' not found");
  // Over etcd's request limit: a clear error, nothing stored.
  auto big = ha.Put("/metadata?key=big", std::string(2 << 20, 'x'), "text/plain");
  ASSERT_TRUE(big);
  auto err = Json::parse(big->body, nullptr, false);
  EXPECT_EQ(err["success"], false);
  EXPECT_NE(err["error_message"].get<std::string>().find("etcd request limit"), std::string::npos);
  EXPECT_EQ(Json::parse(hb.Get("/metadata?key=big")->body, nullptr, false)["success"], false);
}

}  // namespace
}  // namespace tierkv
