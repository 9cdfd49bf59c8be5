// Inventory: this manager's side of the peer inventory streams.
//
// Owner side: every peer opens one stream (peer.proto, Peer/Inventory) and
// gets a bounded snapshot of this manager's store (StoreAdmin::Snapshot: ordered
// pages, then the page count, record count, transcript digest and watermark),
// then contiguous delta batches read from the store's change journal. A
// requester that falls behind the journal gets a reset frame and re-opens (a
// new snapshot of this owner only). One stream is served per requester node:
// a newer one from the same node cancels the older (a requester that
// reconnected, or one whose old connection is half open, never holds two);
// streams for more than kMaxServedRequesters nodes at once are refused.
//
// Requester side: one follower thread per other live member opens that
// member's stream, builds the view hidden, validates the page order, page and
// record counts and the digest, then installs it whole into the GlobalIndex and
// applies the deltas. Any fault (a bad page, a gap, a broken stream, a wrong
// owner) drops the stream, leaves that owner's entries as partial hints and
// retries; other owners are untouched. A stream that goes silent (no frame,
// not even the owner's heartbeat, for stall_ms: a partition that drops packets
// without closing anything) is dropped the same way, by the reconciler
// thread's watch. Members that leave are forgotten at once (Membership's
// listener).
//
// Thread-safety: Start/Stop from one thread; the rest from any.
#ifndef TIERKV_CLUSTER_INVENTORY_H_
#define TIERKV_CLUSTER_INVENTORY_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/copy_tracker.h"
#include "cluster/global_index.h"
#include "cluster/live_members.h"
#include "cluster/runtime_id.h"
#include "common/clock.h"
#include "common/scheduler.h"
#include "http/ports/cluster.h"
#include "store/store.h"

namespace tierkv {

struct PeerCredentials;
class DeltaEncoder;

struct InventoryOptions {
  std::string node_id;
  std::string runtime_uuid;
  std::function<uint64_t()> epoch;  // this registration's epoch (known once registered)
  size_t page_records = 1024;       // records per snapshot page
  int64_t heartbeat_ms = 1000;      // an idle stream sends an empty batch this often
  // Requester: a stream that brings no frame (not even a heartbeat) for this
  // long is dropped as stalled, and the owner's view turns partial.
  int64_t stall_ms = 3000;
  std::function<bool()> admitting;  // owner side serves only while this says yes
  int64_t coalesce_ms = 0;          // owner: wait this long for more changes before a batch
  std::string scope_kind = "all";   // requester: all | exact | empty
  std::vector<std::string> scope_namespaces;           // exact: sorted, distinct
  std::shared_ptr<const PeerCredentials> credentials;  // null: plaintext
  // Owner side: requesters must be live members (null: any requester; tests).
  const LiveMembers* members = nullptr;
  Clock* clock = nullptr;          // stall times (null: the real clock)
  Scheduler* scheduler = nullptr;  // runs the reconciler (null: ThreadScheduler())
};

// The canonical digest of a scope (hex of xxh3-64 over "tierkv-scope/v1:" +
// kind + ":" + the namespaces joined by ',').
std::string ScopeDigest(const std::string& kind, const std::vector<std::string>& namespaces);

struct InventoryStats {
  uint64_t streams_out = 0;  // open owner-side streams
  uint64_t frames_out = 0, bytes_out = 0;
  uint64_t frames_in = 0, bytes_in = 0;
  uint64_t snapshots_out = 0;
  uint64_t resets_out = 0;          // streams ended for a journal overflow
  uint64_t replaced_out = 0;        // streams cancelled by a newer one of the same requester
  uint64_t refused_out = 0;         // streams refused: no requester named, or too many requesters
  uint64_t stream_failures = 0;     // requester streams that broke (stalls included)
  uint64_t stalls = 0;              // requester streams dropped for bringing nothing
  uint64_t delta_buffer_bytes = 0;  // changes encoded for the owner streams, held now
};

class Inventory {
 public:
  // The most requester nodes served at once (far more than a cluster has).
  static constexpr size_t kMaxServedRequesters = 1024;

  // With `copies` (not owned), the followers tell it every change of a view
  // they install or apply, and every stream that failed or stalled, and
  // SetMembers the members that are live.
  Inventory(InventoryOptions options, Store* store, GlobalIndex* index,
            CopyTracker* copies = nullptr);
  ~Inventory();

  // The live members. The index forgets departed owners before this returns;
  // followers are started and stopped on the inventory's own thread. Never
  // blocks (safe from the membership watch).
  void SetMembers(const std::vector<MemberView>& members);
  // Ends every stream (owner and requester side) and joins the followers.
  void Stop();
  // This manager joined again as a new incarnation: the streams it serves end
  // (their requesters reconnect to the new one), and its followers start
  // again naming the new runtime UUID. Never blocks.
  void SetRuntimeUuid(const std::string& uuid);

  InventoryStats Stats() const;
  // Reports the tierkv_inventory_* families (cluster_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // Owner side, for the peer service (inventory.cc): serves one stream.
  struct ServeContext;  // opaque (gRPC types)
  void Serve(ServeContext& ctx);

 private:
  class Follower;
  friend class Follower;

  const InventoryOptions options_;
  RuntimeId runtime_id_{options_.runtime_uuid};  // this manager's incarnation now
  Store* const store_;
  GlobalIndex* const index_;
  CopyTracker* const copies_;
  const std::unique_ptr<DeltaEncoder> encoder_;  // owner side: every stream's changes
  // One pass: drops silent streams, and starts and stops followers when the
  // members changed (so SetMembers never waits for a follower to wind down).
  void Reconcile();

  Clock* const clock_ = options_.clock ? options_.clock : RealClock();
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<MemberView> wanted_;  // the latest member list (mu_)
  bool changed_ = false;
  bool restart_followers_ = false;                              // every follower starts again (mu_)
  std::map<std::string, std::unique_ptr<Follower>> followers_;  // node -> follower (mu_)
  // Owner side: the stream served to each requester node (served_mu_).
  struct Served {
    uint64_t id = 0;
    std::function<void()> cancel;  // cancels that stream's call
  };
  std::mutex served_mu_;
  std::map<std::string, Served> served_;
  uint64_t served_ids_ = 0;
  std::unique_ptr<PeriodicTask> reconciler_;  // mu_; Reconcile on the scheduler
  std::atomic<uint64_t> streams_out_{0}, frames_out_{0}, bytes_out_{0}, frames_in_{0}, bytes_in_{0},
      snapshots_out_{0}, resets_out_{0}, replaced_out_{0}, refused_out_{0}, stream_failures_{0},
      stalls_{0};
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_INVENTORY_H_
