// HaStateProvider: where /health, /role, /ha_status and /leader get their
// answers. A standalone manager is always the serving leader; cluster mode
// plugs in a provider backed by the coordinator election. It lives with the
// cluster box, which implements it; http/ only reads it (header only, no link
// dependency).
#ifndef TIERKV_CLUSTER_HA_STATE_H_
#define TIERKV_CLUSTER_HA_STATE_H_

#include <cstdint>
#include <string>

namespace tierkv {

struct HaState {
  std::string role = "leader";       // leader | standby | unknown
  std::string ha_state = "serving";  // starting | standby | serving | unknown
  bool service_ready = true;
  bool leader_present = true;
  std::string leader_address = "unknown";
  uint64_t view_version = 0;
};

class HaStateProvider {
 public:
  virtual ~HaStateProvider() = default;
  // Thread-safe.
  virtual HaState Get() const = 0;
};

class StandaloneHaState final : public HaStateProvider {
 public:
  HaState Get() const override { return HaState{}; }
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_HA_STATE_H_
