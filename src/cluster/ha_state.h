// HaStateProvider: where /health, /role, /ha_status, /leader, /cluster/members
// and the cluster metrics get their answers. A standalone manager is always the
// serving leader with no members; cluster mode plugs in Membership
// (cluster/membership.h). http/ sees the cluster only through this interface.
#ifndef TIERKV_CLUSTER_HA_STATE_H_
#define TIERKV_CLUSTER_HA_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tierkv {

struct HaState {
  std::string role = "leader";       // leader | standby | unknown
  std::string ha_state = "serving";  // starting | standby | serving | unknown
  bool service_ready = true;
  bool leader_present = true;
  std::string leader_address = "unknown";
  uint64_t view_version = 0;
};

// One live member, as its leased record in etcd describes it.
struct MemberView {
  std::string node_id;
  uint32_t rank = 0;
  std::string endpoint;       // peer gRPC address peers dial
  std::string data_endpoint;  // data channel
  std::string rest_url;
  std::string runtime_uuid;
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  std::string stream_protocol;
  int64_t since_unix_ms = 0;  // registration time
};

struct ClusterView {
  bool enabled = false;  // false: standalone
  std::string cluster;
  std::string node_id;
  int64_t revision = 0;             // membership revision (view_version)
  std::vector<MemberView> members;  // sorted by node id
};

// Counters for /metrics (cluster mode only).
struct ClusterStats {
  uint64_t members = 0;
  double validity_seconds = 0;  // registration validity left (0 when fenced)
  bool registered = false;
  bool fenced = false;
  bool coordinator = false;
  uint64_t lease_renew_failures = 0;
  uint64_t coordinator_changes = 0;
  uint64_t etcd_unavailable = 0;
  uint64_t etcd_timeouts = 0;
  uint64_t etcd_refused = 0;
  uint64_t etcd_failovers = 0;
  uint64_t watch_reconnects = 0;
  uint64_t watch_compactions = 0;
  uint64_t watch_resyncs = 0;
};

class HaStateProvider {
 public:
  virtual ~HaStateProvider() = default;
  // All thread-safe.
  virtual HaState Get() const = 0;
  virtual ClusterView Members() const { return {}; }
  virtual ClusterStats Stats() const { return {}; }
};

class StandaloneHaState final : public HaStateProvider {
 public:
  HaState Get() const override { return HaState{}; }
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_HA_STATE_H_
