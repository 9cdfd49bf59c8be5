// Helpers of the cluster tests: managers in cluster mode on loopback, their
// REST answers, and direct etcd access.
#ifndef TIERKV_TESTS_CLUSTER_UTIL_H_
#define TIERKV_TESTS_CLUSTER_UTIL_H_

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "etcd/etcd_client.h"
#include "etcd_process.h"
#include "fault_proxy.h"
#include "manager_process.h"
#include "scratch_dir.h"
#include "tierkv/client.h"

namespace tierkv::cluster_test {

using testing::EtcdCluster;
using testing::ManagerProcess;
using testing::ScratchDir;

using Json = nlohmann::json;

inline constexpr int kTtl = 3;  // seconds: registration validity 1.5 s
// With three etcd members a killed raft leader leaves the cluster without one
// for about an election timeout (1 s); the validity must outlast that.
inline constexpr int kTtl3 = 8;

inline std::string UniqueCluster() {
  static int n = 0;
  return "c" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

struct Node {
  std::string id;
  std::string addr;  // advertised peer address
  std::unique_ptr<ManagerProcess> proc;
};

inline std::vector<std::string> NodeArgs(const std::string& endpoints, const std::string& cluster,
                                         const std::string& id, const std::string& addr,
                                         std::vector<std::string> extra = {}, int ttl = kTtl) {
  std::vector<std::string> a = {"--etcd-endpoints",
                                endpoints,
                                "--cluster-name",
                                cluster,
                                "--node-id",
                                id,
                                "--addr",
                                addr,
                                "--membership-ttl-secs",
                                std::to_string(ttl)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A manager on a peer port of its own. A port found free can still be taken
// by another process before the manager binds it: that start is tried again
// on another port (up to three times); any other failure aborts the test
// binary with what the manager printed.
inline Node StartNode(const std::string& endpoints, const std::string& cluster,
                      const std::string& id, std::vector<std::string> extra = {}, int ttl = kTtl) {
  Node n;
  n.id = id;
  std::string why;
  for (int attempt = 0; attempt < 3; ++attempt) {
    n.addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
    n.proc = ManagerProcess::TryStart(NodeArgs(endpoints, cluster, id, n.addr, extra, ttl), &why);
    if (n.proc) return n;
    if (why.find("cannot listen on --addr") == std::string::npos) break;
  }
  std::fprintf(stderr, "StartNode %s: %s\n", id.c_str(), why.c_str());
  std::abort();
}

// A manager its peers reach only through a proxy in front of its peer port
// (--peer-advertise-addr), which can drop everything without closing
// anything: a partition, with the process alive and its etcd lease renewed.
struct ProxiedNode {
  std::unique_ptr<testing::FaultProxy> proxy;
  std::unique_ptr<ManagerProcess> proc;
};
inline ProxiedNode StartBehindProxy(const std::string& endpoints, const std::string& cluster,
                                    const std::string& id) {
  ProxiedNode n;
  const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  n.proxy = std::make_unique<testing::FaultProxy>(addr);
  std::string why;
  n.proc = ManagerProcess::TryStart(
      NodeArgs(endpoints, cluster, id, addr, {"--peer-advertise-addr", n.proxy->addr()}), &why);
  if (!n.proc) {
    std::fprintf(stderr, "StartBehindProxy %s: %s\n", id.c_str(), why.c_str());
    std::abort();
  }
  return n;
}

// The answer's JSON; null when there is none or it does not parse, so that a
// caller's j["a"]["b"] reads null instead of throwing (a discarded value
// throws on operator[], and a throw inside a wait aborts the test binary).
inline Json GetJson(const ManagerProcess& m, const std::string& path) {
  httplib::Client http(m.rest());
  http.set_read_timeout(5, 0);
  auto res = http.Get(path);
  if (!res) return Json();
  Json j = Json::parse(res->body, nullptr, false);
  return j.is_discarded() ? Json() : j;
}

inline std::string GetText(const ManagerProcess& m, const std::string& path) {
  httplib::Client http(m.rest());
  auto res = http.Get(path);
  return res ? res->body : "";
}

inline std::set<std::string> MemberIds(const ManagerProcess& m) {
  std::set<std::string> out;
  Json j = GetJson(m, "/cluster/members");
  if (!j.is_object()) return out;
  for (const auto& e : j["members"]) out.insert(e["node_id"].get<std::string>());
  return out;
}

inline std::unique_ptr<etcd::Client> EtcdFor(const EtcdCluster& etcd) {
  etcd::ClientOptions o;
  for (int i = 0; i < etcd.size(); ++i) o.endpoints.push_back(etcd.client_addr(i));
  auto c = etcd::Client::Create(o);
  EXPECT_TRUE(c.ok());
  return std::move(*c);
}

// Registers a member record for `node` (runtime `uuid`) by hand, at an
// address where nothing answers, so that managers take requests naming it as
// a live member's. Returns the lease to revoke (0 on failure).
inline int64_t RegisterByHand(const EtcdCluster& etcd, const std::string& cluster,
                              const std::string& node, const std::string& uuid, uint32_t rank) {
  auto kv = EtcdFor(etcd);
  auto lease = kv->GrantLease(30);
  if (!lease.ok()) return 0;
  Json record = {
      {"node_id", node},      {"rank", rank}, {"endpoint", "127.0.0.1:1"},
      {"runtime_uuid", uuid}, {"epoch", 1},   {"stream_protocol", "tierkv/inventory-stream/v1"}};
  if (!kv->Put("/tierkv/v1/" + cluster + "/members/" + node, record.dump(), lease->id).ok()) {
    return 0;
  }
  return lease->id;
}

// POSTs `body` (JSON) to `path`; the answer's body ("" when none came).
inline std::string PostText(const ManagerProcess& m, const std::string& path,
                            const std::string& body, int timeout_s = 10) {
  httplib::Client http(m.rest());
  http.set_read_timeout(timeout_s, 0);
  auto res = http.Post(path, body, "application/json");
  return res ? res->body : "";
}

// Starts node "a" and waits until it is the coordinator (so that drain jobs
// are asked of it), as StartNode.
inline Node StartCoordinator(const std::string& endpoints, const std::string& cluster,
                             std::vector<std::string> extra = {}) {
  Node a = StartNode(endpoints, cluster, "a", std::move(extra));
  EXPECT_TRUE(testing::WaitFor(
      [&] { return testing::ScrapeMetric(*a.proc, "tierkv_cluster_coordinator") == 1; }));
  return a;
}

// A value that depends on its key and size, so every byte can be checked.
inline std::string PatternValue(const std::string& key, size_t size) {
  std::string v(size, '\0');
  std::mt19937_64 rng(std::hash<std::string>{}(key) ^ size);
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, size - i));
  }
  return v;
}

// Put and get one object through the manager's shared-memory socket.
inline Status LocalRoundTrip(const ManagerProcess& m, const std::string& key) {
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return c.status();
  const std::string value(4096, 'v');
  if (Status st = (*c)->Put(key, value); !st.ok()) return st;
  Result<std::string> back = (*c)->Get(key);
  if (!back.ok()) return back.status();
  return *back == value ? Status::Ok() : Status(Code::kInternal, "wrong bytes");
}

}  // namespace tierkv::cluster_test

#endif  // TIERKV_TESTS_CLUSTER_UTIL_H_
