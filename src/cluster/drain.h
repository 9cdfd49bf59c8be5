// DrainJobs: POST /api/v1/drain_jobs in cluster mode (docs/cluster.md,
// "Drain jobs"). The coordinator runs each job: it asks the owner of the
// segment (or node) for what it holds there, has other live managers fetch
// those objects through the ordinary grant path (Peer/Pull: a remote read on
// the target), and then asks the owner to remove each value that reached a
// target, if it is still the same value (Peer/Drop checks the generation).
// Objects put on the owner after the listing stay there; a get on the owner
// of a drained key is a remote read of the moved copy, so nothing is lost.
//
// One job runs at a time; a job is a thread of its own. Cancel stops it
// between batches (the batch in flight completes). Finished jobs are kept for
// query (the last 64).
//
// Thread-safety: thread-safe.
#ifndef TIERKV_CLUSTER_DRAIN_H_
#define TIERKV_CLUSTER_DRAIN_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/scheduler.h"
#include "http/ports/cluster.h"
#include "http/ports/drain.h"
#include "tierkv/status.h"

namespace tierkv {

// What this coordinator's drain jobs did.
struct DrainStats {
  bool running = false;
  uint64_t jobs_done = 0, jobs_cancelled = 0, jobs_failed = 0;
  uint64_t objects_moved = 0, objects_failed = 0, objects_gone = 0, bytes_moved = 0;
};

struct PeerCredentials;

class DrainJobs final : public DrainControl {
 public:
  // Where job numbers come from: unique across the cluster (the manager
  // passes etcd's counters/drain-jobs), so a job id never names another
  // coordinator's job; null: a counter of this object's own.
  using JobNumbers = std::function<Result<uint64_t>()>;

  // `membership` (members, coordinator role) is not owned. `self` is this
  // manager's node id. Jobs run on a work queue of `scheduler` (null:
  // ThreadScheduler()).
  DrainJobs(const HaStateProvider* membership, std::string self,
            std::shared_ptr<const PeerCredentials> credentials, JobNumbers numbers = nullptr,
            Scheduler* scheduler = nullptr);
  ~DrainJobs();

  // Starts a job for `segment` ("rank-<R>-dram" / "rank-<R>-ssd") or, when
  // it is empty, every object of `node`. Errors: UNAVAILABLE (this manager is
  // not the coordinator: the message names it, or no job number could be
  // had), INVALID_ARGUMENT (neither or both given, an unknown segment or
  // node, no other live manager to drain to), RETRY (a job is running).
  Result<std::string> Start(const std::string& segment, const std::string& node) override;
  // NOT_FOUND for an unknown job id.
  Result<DrainJobView> Query(const std::string& id) const override;
  // Asks a running job to stop; OK also when it had already ended.
  Status Cancel(const std::string& id) override;
  // Stops the running job and waits for it (shutdown); Start refuses after.
  void Stop();
  // Jobs and objects of this manager's jobs so far (a running job's objects
  // count as they are moved).
  DrainStats Stats() const;
  void ReportMetrics(MetricSink& sink) const override;  // cluster_metrics.cc

 private:
  struct Job;
  void Run(const std::shared_ptr<Job>& job);

  const HaStateProvider* const membership_;
  const std::string self_;
  const std::shared_ptr<const PeerCredentials> credentials_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::deque<std::string> order_;  // job ids, oldest first
  std::shared_ptr<Job> running_;
  const JobNumbers numbers_;
  const std::unique_ptr<WorkQueue> runner_;  // one job at a time
  uint64_t next_id_ = 1;                     // without numbers_
  DrainStats stats_;                         // mu_ (running: from running_)
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_DRAIN_H_
