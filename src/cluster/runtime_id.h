// RuntimeId: this process's runtime UUID as the cluster knows it now. It
// changes when a fenced process joins again as a new incarnation
// (Membership::Rejoin); each component that names or checks it keeps one.
//
// Thread-safety: thread-safe.
#ifndef TIERKV_CLUSTER_RUNTIME_ID_H_
#define TIERKV_CLUSTER_RUNTIME_ID_H_

#include <mutex>
#include <string>
#include <utility>

namespace tierkv {

class RuntimeId {
 public:
  explicit RuntimeId(std::string uuid = {}) : uuid_(std::move(uuid)) {}
  std::string Get() const {
    std::lock_guard lock(mu_);
    return uuid_;
  }
  void Set(std::string uuid) {
    std::lock_guard lock(mu_);
    uuid_ = std::move(uuid);
  }

 private:
  mutable std::mutex mu_;
  std::string uuid_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_RUNTIME_ID_H_
