// Starts a manager process in cluster mode on loopback, for the cluster
// benchmarks (a free peer port, a 10 s membership TTL).
#ifndef TIERKV_BENCH_CLUSTER_MEMBER_H_
#define TIERKV_BENCH_CLUSTER_MEMBER_H_

#include <memory>
#include <string>
#include <vector>

#include "etcd_process.h"
#include "manager_process.h"

namespace tierkv::bench {

inline std::unique_ptr<testing::ManagerProcess> StartMember(const testing::EtcdCluster& etcd,
                                                            const std::string& cluster,
                                                            const std::string& id,
                                                            std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--etcd-endpoints",
                                   etcd.endpoints(),
                                   "--cluster-name",
                                   cluster,
                                   "--node-id",
                                   id,
                                   "--addr",
                                   "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()),
                                   "--membership-ttl-secs",
                                   "10"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<testing::ManagerProcess>(args);
}

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_CLUSTER_MEMBER_H_
