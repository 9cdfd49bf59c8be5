// The REST API's ports to the cluster: what /health, /role, /ha_status,
// /leader, /cluster/members, /cache/metadata and the cluster metrics read.
// http/ sees the cluster only through these interfaces and plain types, and
// does not link it; cluster/ implements them (Membership: HaStateProvider,
// ClusterIndexAdapter: ClusterIndexView) and the manager wires them in. A
// standalone manager is always the serving leader with no members.
#ifndef TIERKV_HTTP_PORTS_CLUSTER_H_
#define TIERKV_HTTP_PORTS_CLUSTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/metric_sink.h"
#include "tierkv/status.h"

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
  std::string runtime_uuid;         // this process's incarnation
  int64_t revision = 0;             // membership revision (view_version)
  std::vector<MemberView> members;  // sorted by node id
};

class HaStateProvider {
 public:
  virtual ~HaStateProvider() = default;
  // All thread-safe.
  virtual HaState Get() const = 0;
  virtual ClusterView Members() const { return {}; }
  // This process's epoch (0 until it has registered, and standalone).
  virtual uint64_t Epoch() const { return 0; }
  // The membership's families for /metrics (cluster mode).
  virtual void ReportMetrics(MetricSink&) const {}
};

// What /cache/metadata reports: the global index's coverage of the other
// owners at the captured membership revision, and the streams' traffic.
struct CoverageView {
  bool enabled = false;
  std::string scope_kind = "all";  // all | exact | empty
  std::string scope_digest;
  uint64_t namespace_count = 0;
  int64_t membership_revision = 0;
  uint64_t expected = 0, complete = 0, staging = 0, partial = 0, missing = 0;
  bool complete_coverage = false;  // every expected owner's view is complete
  uint64_t entries = 0, index_bytes = 0, index_budget = 0;
  uint64_t installs = 0, resets = 0, refused_budget = 0, rejected_views = 0;
  uint64_t streams_out = 0, stream_failures = 0, stalls = 0;
  uint64_t frames_in = 0, frames_out = 0, bytes_in = 0, bytes_out = 0;
  uint64_t snapshots_out = 0, resets_out = 0, replaced_out = 0, refused_out = 0;
  uint64_t delta_buffer_bytes = 0;  // owner side: changes encoded for the streams, held now
};

// One replica of a key on another owner, as the global index knows it.
struct RemoteBlobView {
  std::string owner;
  uint32_t rank = 0;
  int medium = 1;  // tierkv Medium
  uint64_t size = 0;
  uint64_t generation = 0;
  bool complete = true;  // false: a partial hint from a broken stream
};

// The incarnation that took an inventory fence: its owner's node id and,
// when the fence names them, its runtime UUID and its epoch (0: not named).
// A node's epoch grows with each registration, so a fence whose epoch is
// below the member's now is of an incarnation that has left, even one this
// manager never saw.
struct FenceOwner {
  std::string node{};
  std::string uuid{};
  uint64_t epoch = 0;
};

// What a wait for an inventory fence saw last.
struct FenceSeen {
  // The sequence the view of the fence's owner covers (0: no complete view
  // of the fence's incarnation); nullopt: the owner is not a live member
  // other than this manager.
  std::optional<uint64_t> covered;
  // There is a complete view of the fence's incarnation (of any, when the
  // fence names none): only then does `covered` count, even for sequence 0.
  bool current = false;
  std::string view_uuid;  // the incarnation that view is of ("" when none is complete)
  bool retired = false;   // the fence's incarnation has left the membership seen here
  uint64_t epoch = 0;     // the owner's newest epoch seen here (0: unknown)

  // The wait is over: the fence is covered, or can never be.
  bool Settled(uint64_t sequence) const {
    return !covered || retired || (current && *covered >= sequence);
  }
};

// The global index as http/ sees it (cluster mode only).
class ClusterIndexView {
 public:
  virtual ~ClusterIndexView() = default;
  virtual CoverageView Coverage() const = 0;
  // The index's and the inventory streams' families for /metrics.
  virtual void ReportMetrics(MetricSink& sink) const = 0;
  virtual std::vector<RemoteBlobView> Locate(const std::string& tenant,
                                             const std::string& key) const = 0;
  // Waits up to `timeout_ms` until this manager's view of `owner.node`
  // covers `sequence` (only a view of incarnation `owner.uuid` counts, when
  // it is named); returns at once when the node is not a live member other
  // than this manager, or the fence's incarnation has left the membership
  // (FenceOwner).
  virtual FenceSeen AwaitOwner(const FenceOwner& owner, uint64_t sequence,
                               int64_t timeout_ms) const = 0;
};

// What a wait for an inventory fence (taken by `owner` at `sequence`) came
// to: OK when covered, else UNAVAILABLE "unknown owner: ...", "stale fence:
// ..." or "timeout: ...". The one wording of /cache/metadata/await and
// Peer/Drop.
inline Status FenceOutcome(const FenceOwner& owner, uint64_t sequence, const FenceSeen& seen) {
  if (!seen.covered) {
    return Status(Code::kUnavailable,
                  "unknown owner: " + owner.node +
                      " is not a live member of this cluster (a fence names the owner's node id)");
  }
  if (seen.retired) {
    const std::string taker =
        owner.uuid.empty() ? "epoch " + std::to_string(owner.epoch) : "runtime " + owner.uuid;
    const std::string now =
        owner.epoch != 0 && seen.epoch > owner.epoch
            ? "; " + owner.node + " now runs epoch " + std::to_string(seen.epoch)
            : std::string();
    return Status(Code::kUnavailable, "stale fence: " + taker + " of " + owner.node +
                                          ", which took it, has left the cluster (a restarted "
                                          "owner numbers its changes anew)" +
                                          now);
  }
  if (seen.current && *seen.covered >= sequence) return Status::Ok();
  if (!owner.uuid.empty() && !seen.view_uuid.empty() && seen.view_uuid != owner.uuid) {
    return Status(Code::kUnavailable,
                  "timeout: the view of " + owner.node + " here is of runtime " + seen.view_uuid +
                      ", not of runtime " + owner.uuid + ", which took the fence");
  }
  if (!seen.current) {
    return Status(Code::kUnavailable,
                  "timeout: there is no complete view of " + owner.node + " here yet");
  }
  return Status(Code::kUnavailable, "timeout: the view of " + owner.node + " covers sequence " +
                                        std::to_string(*seen.covered) + ", not yet " +
                                        std::to_string(sequence));
}

class StandaloneHaState final : public HaStateProvider {
 public:
  HaState Get() const override { return HaState{}; }
};

}  // namespace tierkv

#endif  // TIERKV_HTTP_PORTS_CLUSTER_H_
