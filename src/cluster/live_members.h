// LiveMembers: the (node id, runtime UUID) of every live member of the
// cluster, as the membership watch last applied them.
//
// Peer requests name their requester; an owner serves only requesters that
// are live members (inventory streams, source grants, drain requests), so a
// process that reaches the peer ports cannot take grant slots, read an
// inventory or drive a drain under names it made up. Without peer mTLS a
// requester could still copy a live member's names (they are in etcd): that
// needs --peer-tls-* (docs/cluster.md, "Peer mTLS").
//
// Thread-safety: thread-safe.
#ifndef TIERKV_CLUSTER_LIVE_MEMBERS_H_
#define TIERKV_CLUSTER_LIVE_MEMBERS_H_

#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/ports/cluster.h"
#include "tierkv/status.h"

namespace tierkv {

class LiveMembers {
 public:
  void Set(const std::vector<MemberView>& members) {
    std::set<std::pair<std::string, std::string>> live;
    for (const MemberView& m : members) live.emplace(m.node_id, m.runtime_uuid);
    std::lock_guard lock(mu_);
    live_.swap(live);
  }
  bool Contains(std::string_view node, std::string_view uuid) const {
    std::lock_guard lock(mu_);
    return live_.count({std::string(node), std::string(uuid)}) != 0;
  }
  // OK for a live member; else NOT_FOUND naming the requester.
  Status Check(std::string_view node, std::string_view uuid) const {
    if (Contains(node, uuid)) return Status::Ok();
    return Status(Code::kNotFound, "requester '" + std::string(node.substr(0, 128)) + "' (" +
                                       std::string(uuid.substr(0, 64)) +
                                       ") is not a live member of this cluster");
  }

 private:
  mutable std::mutex mu_;
  std::set<std::pair<std::string, std::string>> live_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_LIVE_MEMBERS_H_
