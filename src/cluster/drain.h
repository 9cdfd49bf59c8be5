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

#include "cluster/ha_state.h"
#include "tierkv/status.h"

namespace tierkv {

struct PeerCredentials;

struct DrainJobView {
  std::string id;
  std::string state;    // running | done | cancelled | failed
  std::string source;   // the node drained
  std::string segment;  // "rank-R-dram", "rank-R-ssd", or "" for a whole node
  uint64_t total = 0, moved = 0, failed = 0, bytes = 0;
  int64_t started_unix_ms = 0, finished_unix_ms = 0;
  std::string error;  // why the job failed
};

// The one-line text summary of a job, fields in this order:
// job_id state source segment objects_total objects_moved objects_failed
// bytes_moved started_ms finished_ms (finished_ms 0 while running).
std::string DrainSummary(const DrainJobView& v);

class DrainJobs {
 public:
  // Where job numbers come from: unique across the cluster (the manager
  // passes etcd's counters/drain-jobs), so a job id never names another
  // coordinator's job; null: a counter of this object's own.
  using JobNumbers = std::function<Result<uint64_t>()>;

  // `membership` (members, coordinator role) is not owned. `self` is this
  // manager's node id.
  DrainJobs(const HaStateProvider* membership, std::string self,
            std::shared_ptr<const PeerCredentials> credentials, JobNumbers numbers = nullptr);
  ~DrainJobs();

  // Starts a job for `segment` ("rank-<R>-dram" / "rank-<R>-ssd") or, when
  // it is empty, every object of `node`. Errors: UNAVAILABLE (this manager is
  // not the coordinator: the message names it, or no job number could be
  // had), INVALID_ARGUMENT (neither or both given, an unknown segment or
  // node, no other live manager to drain to), RETRY (a job is running).
  Result<std::string> Start(const std::string& segment, const std::string& node);
  // NOT_FOUND for an unknown job id.
  Result<DrainJobView> Query(const std::string& id) const;
  // Asks a running job to stop; OK also when it had already ended.
  Status Cancel(const std::string& id);
  // Stops the running job and joins it (shutdown).
  void Stop();
  // Jobs and objects of this manager's jobs so far (a running job's objects
  // count as they are moved).
  DrainStats Stats() const;

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
  std::thread runner_;
  const JobNumbers numbers_;
  uint64_t next_id_ = 1;  // without numbers_
  DrainStats stats_;      // mu_ (running: from running_)
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_DRAIN_H_
