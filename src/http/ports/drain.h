// The REST API's port to drain jobs (POST /api/v1/drain_jobs, cluster mode):
// cluster/drain.h's DrainJobs implements it; http/ sees only this.
#ifndef TIERKV_HTTP_PORTS_DRAIN_H_
#define TIERKV_HTTP_PORTS_DRAIN_H_

#include <cstdint>
#include <string>

#include "common/metric_sink.h"
#include "tierkv/status.h"

namespace tierkv {

struct DrainJobView {
  std::string id;
  std::string state;    // running | done | cancelled | failed
  std::string source;   // the node drained
  std::string segment;  // "rank-R-dram", "rank-R-ssd", or "" for a whole node
  uint64_t total = 0, moved = 0, failed = 0, bytes = 0;
  int64_t started_unix_ms = 0, finished_unix_ms = 0;
  std::string error;  // why the job failed
};

// Drain jobs this manager ran as the coordinator since it started, for
// /metrics.

class DrainControl {
 public:
  virtual ~DrainControl() = default;
  // All thread-safe.
  // Starts a job for `segment` ("rank-<R>-dram" / "rank-<R>-ssd") or, when
  // it is empty, every object of `node`; its id. Errors: UNAVAILABLE (this
  // manager is not the coordinator: the message names it, or no job number
  // could be had), INVALID_ARGUMENT (neither or both given, an unknown
  // segment or node, no other live manager to drain to), RETRY (a job is
  // running).
  virtual Result<std::string> Start(const std::string& segment, const std::string& node) = 0;
  // NOT_FOUND for an unknown job id.
  virtual Result<DrainJobView> Query(const std::string& id) const = 0;
  // Asks a running job to stop; OK also when it had already ended.
  virtual Status Cancel(const std::string& id) = 0;
  // Jobs and objects of this manager's jobs so far (a running job's objects
  // count as they are moved).
  // Reports the tierkv_drain_* families.
  virtual void ReportMetrics(MetricSink& sink) const = 0;
};

}  // namespace tierkv

#endif  // TIERKV_HTTP_PORTS_DRAIN_H_
