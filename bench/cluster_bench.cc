// tierkv_cluster_bench: how fast membership changes are seen.
//
//   tierkv_cluster_bench [--managers 5] [--runs 5] [--ttl 3] [--json PATH]
//
// Each run starts a fresh etcd and N-1 managers, then one more manager, and
// measures (1) from its process start to being listed by /cluster/members on
// every other manager, and (2) from its SIGKILL to being gone from every list,
// polling every 5 ms. Reports the medians, and (2) against the TTL (a killed
// member's lease expires after one TTL, so the ratio is expected near 1).
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "etcd_process.h"
#include "manager_process.h"

namespace tierkv::bench {
namespace {

bool Lists(const testing::ManagerProcess& m, const std::string& node) {
  httplib::Client http(m.rest());
  auto res = http.Get("/cluster/members");
  if (!res) return false;
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_object()) return false;
  for (const auto& e : j["members"]) {
    if (e["node_id"] == node) return true;
  }
  return false;
}

std::unique_ptr<testing::ManagerProcess> Start(const testing::EtcdCluster& etcd,
                                               const std::string& cluster, const std::string& id,
                                               int ttl) {
  return std::make_unique<testing::ManagerProcess>(std::vector<std::string>{
      "--etcd-endpoints", etcd.endpoints(), "--cluster-name", cluster, "--node-id", id, "--addr",
      "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()), "--membership-ttl-secs",
      std::to_string(ttl)});
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  using namespace tierkv;
  using namespace tierkv::bench;
  int managers = 5, runs = 5, ttl = 3;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--managers" && i + 1 < argc) {
      managers = std::stoi(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else if (a == "--ttl" && i + 1 < argc) {
      ttl = std::stoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: tierkv_cluster_bench [--managers N] [--runs R] [--ttl S]\n");
      return 2;
    }
  }
  std::vector<double> join, leave;
  for (int r = 0; r < runs; ++r) {
    testing::EtcdCluster etcd(1);
    const std::string cluster = "bench" + std::to_string(getpid()) + "-" + std::to_string(r);
    std::vector<std::unique_ptr<testing::ManagerProcess>> others;
    for (int i = 0; i + 1 < managers; ++i) {
      others.push_back(Start(etcd, cluster, "m" + std::to_string(i), ttl));
    }
    auto all_list = [&](bool want) {
      for (auto& m : others) {
        if (Lists(*m, "new") != want) return false;
      }
      return true;
    };
    const double t0 = NowSeconds();
    auto joiner = Start(etcd, cluster, "new", ttl);
    while (!all_list(true)) usleep(5000);
    join.push_back(NowSeconds() - t0);
    const double t1 = NowSeconds();
    joiner->Stop(SIGKILL);
    while (!all_list(false)) usleep(5000);
    leave.push_back(NowSeconds() - t1);
    std::printf("run %d: visible to %d others after %.3f s; gone %.3f s after SIGKILL (TTL %d s)\n",
                r + 1, managers - 1, join.back(), leave.back(), ttl);
  }
  std::printf("median: start -> visible everywhere %.3f s; SIGKILL -> gone everywhere %.3f s\n",
              Median(join), Median(leave));
  std::vector<Ratio> ratios = {{"start -> visible / TTL", Median(join) / ttl, 0},
                               {"SIGKILL -> gone / TTL", Median(leave) / ttl, 0}};
  PrintRatios(ratios);
  if (!json.empty() && !WriteJson(json, {}, ratios)) return 1;
  return 0;
}
