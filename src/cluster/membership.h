// Membership: this manager's leased registration in etcd, the member list, the
// coordinator election and the HA state derived from them.
//
// Layout under /tierkv/v1/<cluster>/ (docs/cluster.md):
//   format                 {"stream_protocol", "cluster_uuid"}: created by the first
//                          manager; a different stream protocol is refused at start
//   epochs/<node>          persistent epoch, advanced by every registration (CAS)
//   ranks/<node>           persistent rank of a node id; rank-owners/<rank> -> node
//   members/<node>         leased member record (JSON, MemberView's fields)
//   coordinator/<lease>    etcd election candidates (the oldest one is elected)
//   metadata/<key>         the REST /metadata store in cluster mode
//
// Registration (Register): the format record is checked (or created), the rank
// claimed, a lease granted, then one transaction advances the epoch and writes
// the member record bound to the lease, only if no live member has this node id.
// The registration is valid until (send time of the last acknowledged lease
// request) + TTL/2. Once that passes, or etcd says the lease is gone, the
// registration is fenced for good: admitting() is false from then on and the
// keepalive and campaign stop. A fenced registration never revives; with
// `rejoin` (the default) the process registers a new incarnation as soon as
// etcd answers again: a new runtime UUID (the incarnation listener hears it
// first, so grants, streams and fetches of the old one end), the next epoch,
// a new lease and member record; the old lease is revoked and its record
// deleted. Local DRAM/SSD service, and its contents, are not affected by any
// of this.
//
// The member list comes from a watch of the prefix (with periodic re-reads, see
// etcd/watcher.h); a member whose record disappears is gone from Members() at
// once.
//
// Thread-safety: Register and Shutdown from one thread; everything else from
// any thread.
#ifndef TIERKV_CLUSTER_MEMBERSHIP_H_
#define TIERKV_CLUSTER_MEMBERSHIP_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/scheduler.h"
#include "etcd/etcd_client.h"
#include "etcd/lease_keeper.h"
#include "etcd/watcher.h"
#include "http/ports/cluster.h"

namespace tierkv {

// The inventory stream protocol this build speaks (in the format record).
inline constexpr const char* kStreamProtocol = "tierkv/inventory-stream/v1";

struct MembershipOptions {
  std::string cluster;
  std::string node_id;
  std::string endpoint;       // advertised peer address (--peer-advertise-addr or --addr)
  std::string data_endpoint;  // --data-addr
  std::string rest_url;
  int64_t ttl_secs = 30;
  std::optional<uint32_t> rank;       // --rank; otherwise the lowest free, kept per node id
  int64_t resync_ms = 5000;           // periodic re-read of the prefix
  int64_t compact_every_ms = 300000;  // coordinator: compact history older than this
  bool rejoin = true;                 // re-register a new incarnation after a fence
  int64_t rejoin_retry_ms = 1000;     // between attempts while etcd does not answer
  Scheduler* scheduler = nullptr;     // the monitor and the resync (null: ThreadScheduler())
};

// What the membership has been through, for /metrics.
struct MembershipCounters {
  uint64_t fences = 0;
  uint64_t rejoins = 0;
  int64_t last_rejoin_unix_ms = 0;  // 0: never
};

class Membership final : public HaStateProvider {
 public:
  // `client` and `clock` must outlive the membership.
  Membership(MembershipOptions options, etcd::Client* client, const Clock* clock);
  ~Membership() override;

  static std::string Prefix(const std::string& cluster) { return "/tierkv/v1/" + cluster + "/"; }

  // Checks the format record and claims the rank (both before anything serves,
  // so segments can be named by the rank). Errors: UNAVAILABLE (etcd did not
  // answer), INVALID_ARGUMENT (format mismatch, naming both versions; a rank
  // owned by another node).
  Result<uint32_t> Prepare();
  // Registers and starts the keepalive, the watch and the campaign. Errors:
  // DUPLICATED (a live member has this node id), UNAVAILABLE.
  Status Register();
  // The REST URL the member record advertises (call before Register, once the
  // REST listener has its port).
  void set_rest_url(std::string url) { options_.rest_url = std::move(url); }
  // The data channel's address, once bound (before Register).
  void set_data_endpoint(std::string endpoint) { options_.data_endpoint = std::move(endpoint); }
  // Graceful leave, in two steps so the owner can drain its peer listener in
  // between. BeginShutdown fences (no new remote admission) and resigns the
  // election; Leave stops the keepalive, revokes the lease, deletes the member
  // record (only if still bound to our lease) and stops the watch. Shutdown
  // does both. Each is idempotent and bounded by the client's call deadline.
  void BeginShutdown();
  void Leave();
  void Shutdown() {
    BeginShutdown();
    Leave();
  }

  // The next value (1, 2, ...) of the cluster-wide counter `name`, kept in
  // etcd at counters/<name>: no two calls on any manager of the cluster ever
  // get the same value, across restarts too. Errors: UNAVAILABLE (etcd did
  // not answer, or the counter kept moving under 8 attempts).
  Result<uint64_t> NextCounterValue(const std::string& name);

  // True while registered and within validity (remote admission allowed).
  bool admitting() const;
  uint32_t rank() const { return rank_; }
  const std::string& node_id() const { return options_.node_id; }
  uint64_t epoch() const { return epoch_.load(); }
  // This incarnation's runtime UUID (a new one after each rejoin).
  std::string runtime_uuid() const {
    std::lock_guard lock(id_mu_);
    return runtime_uuid_;
  }
  MembershipCounters counters() const;
  const std::string& cluster_uuid() const { return cluster_uuid_; }

  // Called with the whole member list after every change the watch applies
  // (on the watch's thread; it must not block). Set before Register.
  void SetListener(std::function<void(const std::vector<MemberView>&)> listener) {
    listener_ = std::move(listener);
  }
  // Called with the new runtime UUID when a fenced process rejoins, before the
  // new incarnation's record is written (on the monitor task; it may block
  // briefly). Set before Register.
  void SetIncarnationListener(std::function<void(const std::string&)> listener) {
    incarnation_listener_ = std::move(listener);
  }
  // Called once per fence (on the thread that fences; it must not block).
  // Set before Register.
  void SetFenceListener(std::function<void()> listener) { fence_listener_ = std::move(listener); }

  HaState Get() const override;
  ClusterView Members() const override;
  uint64_t Epoch() const override { return epoch(); }
  // The tierkv_cluster_* and tierkv_membership_* families, with the etcd
  // client's and the watcher's (membership_metrics.cc).
  void ReportMetrics(MetricSink& sink) const override;

 private:
  std::string Key(const std::string& suffix) const { return prefix_ + suffix; }
  Status CheckFormat();
  Result<uint32_t> ClaimRank();
  std::string MemberRecord() const;
  bool ValidAt(int64_t now) const;  // registered, not fenced, before validity
  void Fence(const char* why);
  // A lease, then the epoch advanced and the member record written (one
  // transaction, only if no live member has this node id).
  Status RegisterIncarnation();
  // The keepalive and the campaign of the registration just made; stopped
  // again (StopIncarnation) once it is fenced.
  void StartIncarnation();
  void StopIncarnation();
  // After a fence: a new incarnation, once etcd answers.
  Status Rejoin();
  void Monitor();
  void Campaign();
  void ApplyReset(const std::vector<etcd::KeyValue>& kvs, int64_t revision);
  void ApplyEvents(const std::vector<etcd::WatchEvent>& events, int64_t revision);
  void ApplyPut(const etcd::KeyValue& kv);  // view_mu_ held
  void UpdateLeaderLocked();

  MembershipOptions options_;
  const std::string prefix_;
  etcd::Client* const client_;
  const Clock* const clock_;
  mutable std::mutex id_mu_;
  std::string runtime_uuid_;  // id_mu_
  std::string cluster_uuid_;
  uint32_t rank_ = 0;
  std::atomic<uint64_t> epoch_{0};
  int64_t lease_id_ = 0;
  int64_t granted_ttl_ = 0;
  int64_t registered_at_ms_ = 0;

  std::atomic<bool> registered_{false};
  std::atomic<bool> fenced_{false};
  std::atomic<int64_t> valid_until_{0};  // Clock::NowNanos
  std::atomic<bool> elected_{false};
  std::atomic<uint64_t> coordinator_changes_{0};

  etcd::LeaseKeeper keeper_;
  etcd::Watcher watcher_;

  std::function<void(const std::vector<MemberView>&)> listener_;
  std::function<void(const std::string&)> incarnation_listener_;
  std::function<void()> fence_listener_;
  std::atomic<uint64_t> fences_{0}, rejoins_{0};
  std::atomic<int64_t> last_rejoin_ms_{0};
  void Notify();  // calls listener_ with the current list (view_mu_ not held)

  mutable std::mutex view_mu_;
  std::map<std::string, MemberView> members_;                          // node id -> record
  std::map<int64_t, std::pair<std::string, std::string>> candidates_;  // create rev -> (key, node)
  std::string leader_node_;
  int64_t view_revision_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool left_ = false;
  std::optional<etcd::LeaderKey> leader_key_;  // ours, once elected (mu_)
  // Every 100 ms: turns an expired validity into a fence, stops a fenced
  // incarnation and joins again (Monitor, mu_).
  std::unique_ptr<PeriodicTask> monitor_;
  bool incarnation_stopped_ = false;  // the fenced incarnation's keepalive and campaign (mu_)
  int64_t next_rejoin_ns_ = 0;        // mu_
  std::thread campaign_;              // blocks in the election RPC, then compacts as coordinator
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_MEMBERSHIP_H_
