// GrantTable: the owner's source grants (docs/cluster.md, "Remote reads").
//
// A requester that found keys of this manager in its global index asks to
// authorize the exact values it planned from (key and generation) under a
// ticket of its own choosing. Each value is pinned in the store (an SSD-only
// value is rewarmed first; a value at another generation, or gone, is refused
// NOT_FOUND, so a stale index entry never lends memory that was reused) and its
// whole allocation is charged against --transfer-budget, once per grant however
// many of its items share it. The data channel then serves READs of the grant's
// items (GrantSource); Release, the grant's deadline or its requester leaving
// the cluster ends it. Memory stays pinned until the last READ that was
// already sending from it has finished.
//
// Limits: at most max_sessions grants are live at once (active, or awaiting
// release until their deadline), max_per_requester of them for one
// requester, at most max_items items per grant. When the
// budget refuses an item while the same requester still holds other grants
// (releases in progress), the authorization waits up to budget_wait_ms for one
// of them to end, then tries the refused items once more.
//
// Thread-safety: thread-safe. Grants hold pins of `store`; the table must be
// destroyed before it, and after the data channel that reads through it.
#ifndef TIERKV_CLUSTER_GRANTS_H_
#define TIERKV_CLUSTER_GRANTS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cluster/live_members.h"
#include "cluster/runtime_id.h"
#include "common/metric_sink.h"
#include "common/scheduler.h"
#include "store/store.h"
#include "transfer/transport.h"

namespace tierkv {

struct GrantOptions {
  std::string runtime_uuid;          // this owner's; requests naming another are refused
  uint64_t budget_bytes = 0;         // --transfer-budget (0: nothing can be granted)
  int64_t grant_timeout_ms = 30000;  // a grant not released by then is released by the owner
  size_t max_sessions = 1024;
  // ... of them held by one requester (its own bound is 64 per owner), so a
  // requester that leaks grants cannot take every session from the others.
  size_t max_per_requester = 256;
  size_t max_items = 4096;
  int64_t budget_wait_ms = 3000;
  std::function<bool()> admitting;  // grants are given only while this says yes (null: always)
  // Requesters must be live members (null: any requester; tests).
  const LiveMembers* members = nullptr;
};

struct GrantRequestItem {
  std::string tenant;
  std::string key;
  uint64_t generation = 0;
};

struct GrantAnswer {
  Status status;  // OK: granted
  uint64_t size = 0;
  uint64_t generation = 0;
};

struct GrantStats {
  uint64_t sessions = 0;        // live grants now
  uint64_t reserved_bytes = 0;  // charged against the budget now
  uint64_t budget_bytes = 0;
  uint64_t authorizations = 0;  // grants given
  uint64_t items_granted = 0;
  uint64_t refused_stale = 0;     // items gone or at another generation
  uint64_t refused_budget = 0;    // items over the transfer budget
  uint64_t refused_sessions = 0;  // authorizations over max_sessions or max_per_requester
  uint64_t refused_other = 0;     // authorizations refused whole (fenced, wrong owner, bad input)
  uint64_t budget_waits = 0;      // authorizations that waited for the requester's releases
  uint64_t released = 0;          // by the requester
  uint64_t expired = 0;           // by the deadline
  uint64_t departed = 0;          // because the requester left the cluster
};

class GrantTable final : public transfer::GrantSource {
 public:
  // `store` is not owned; `clock` null means the real clock.
  // `scheduler` runs the expiry pass (null: a thread of the table's own).
  GrantTable(GrantOptions options, Store* store, Clock* clock = nullptr,
             Scheduler* scheduler = nullptr);
  ~GrantTable() override;

  // Starts / stops the thread that releases grants past their deadline
  // (tests call ExpireDue themselves).
  void Start();
  void Stop();

  // Authorizes `items` under `ticket` for requester `uuid` (of member `node`);
  // one answer per item, in order. Errors for the whole call: UNAVAILABLE
  // (this manager is fenced or stopping), NOT_FOUND (`expect_owner_uuid` is
  // not this runtime: the requester's entry names an older incarnation; or
  // `node` / `uuid` are not a live member's),
  // NO_SPACE (max_sessions grants are live), INVALID_ARGUMENT (ticket 0 or
  // already live, no items, more than max_items, an invalid key).
  // With `may_block` false the call never waits: when deciding needs a wait
  // (an item held only on SSD, or the budget wait) it undoes what it did
  // (no grant, no pin, no charge, no count) and returns RETRY; the caller
  // then asks again where blocking is allowed.
  Result<std::vector<GrantAnswer>> Authorize(const std::string& node, const std::string& uuid,
                                             const std::string& expect_owner_uuid, uint64_t ticket,
                                             std::span<const GrantRequestItem> items,
                                             bool may_block = true);
  // The last change sequence of this manager's store (its inventory stream's
  // numbering): read after Authorize, every change up to the grant's pins is
  // at or below it.
  uint64_t ChangeSequence() const;
  // Ends `uuid`'s grant `ticket`; false when there is none (already released,
  // expired, or never given).
  bool Release(const std::string& uuid, uint64_t ticket);
  // Ends the grants of requesters whose runtime UUID is not in `live` (they
  // left the cluster). Returns how many.
  size_t ReleaseDeparted(const std::set<std::string>& live);
  // This owner joined again as a new incarnation: authorizations must name
  // `uuid` from now on, and every grant of the old one ends.
  void SetRuntimeUuid(const std::string& uuid) {
    runtime_id_.Set(uuid);
    ReleaseDeparted({});
  }
  // Ends the grants past their deadline. Returns how many.
  size_t ExpireDue();

  // GrantSource (the data channel).
  Result<transfer::GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) override;

  GrantStats Stats() const;
  // Reports the tierkv_grants_* families (cluster_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;
  uint64_t grant_timeout_ms() const { return options_.grant_timeout_ms; }

 private:
  struct Grant;
  // Pins what it can of `items` into `grant`, filling `answers`; true when some
  // item was refused for the budget. Without `may_rewarm`, an item held only
  // on SSD is answered RETRY.
  bool PinItems(Grant& grant, std::span<const GrantRequestItem> items,
                std::vector<GrantAnswer>& answers, bool retry, bool may_rewarm);
  // Takes `grant` (still live under `ticket`) out of the table.
  void Withdraw(uint64_t ticket, const std::shared_ptr<Grant>& grant);
  void Ended(const std::string& uuid, uint64_t charged);  // a Grant's destructor
  // Ends the live grants `pred` picks (called under mu_); returns how many.
  size_t DropIf(const std::function<bool(const Grant&)>& pred);

  const GrantOptions options_;
  RuntimeId runtime_id_{options_.runtime_uuid};  // this owner's incarnation now
  Store* const store_;
  Clock* const clock_;
  Scheduler* const scheduler_;
  std::atomic<uint64_t> reserved_{0};
  std::atomic<uint64_t> next_pin_owner_;

  mutable std::mutex mu_;
  std::condition_variable ended_cv_;                           // a grant ended
  std::unordered_map<uint64_t, std::shared_ptr<Grant>> live_;  // ticket -> grant
  std::unordered_map<std::string, size_t> open_by_requester_;  // grants not yet destroyed
  bool stopping_ = false;
  std::unique_ptr<PeriodicTask> reaper_;  // mu_; ExpireDue 4 times a second

  std::atomic<uint64_t> authorizations_{0}, items_granted_{0}, refused_stale_{0},
      refused_budget_{0}, refused_sessions_{0}, refused_other_{0}, budget_waits_{0}, released_{0},
      expired_{0}, departed_{0};
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_GRANTS_H_
