// SsdStage: the SSD tier as the store's moves use it, apart from the index.
// It owns the device (SsdTier) and its I/O pool, the trash of blobs no replica
// references any more, the pause of writes after an I/O error, the tier's
// counters and its work queue (write-through copies, prefetches). The moves
// that touch the index (demotion, rewarm, SSD eviction) are the store's
// (store_tier.cc); they call in here for the device's side.
//
// Thread-safety: every method from any thread. Replicas made here must be
// gone before the stage is destroyed (the store clears its index first).
#ifndef TIERKV_STORE_SSD_STAGE_H_
#define TIERKV_STORE_SSD_STAGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "common/scheduler.h"
#include "common/work_queue.h"
#include "media/ssd_tier.h"
#include "store/io_pool.h"
#include "store/shard.h"
#include "store/store_types.h"

namespace tierkv {

class SsdStage {
 public:
  // What the tier's moves count; the figures of TierStats.
  struct Counters {
    std::atomic<uint64_t> flush_blobs{0}, flush_bytes{0}, flush_failed{0}, demoted{0};
    std::atomic<uint64_t> rewarm{0}, rewarm_failed{0}, rewarm_bytes{0}, rewarm_bytes_current{0};
    std::atomic<uint64_t> get_hits_ssd{0}, ssd_evicted_objects{0}, ssd_evicted_bytes{0};
    std::atomic<uint64_t> io_errors{0}, corrupt_blobs{0}, prefetch_scheduled{0};
    std::atomic<uint64_t> write_through_dropped{0}, rewarm_waiting{0}, write_pauses{0};
  };

  // `queue_depth`: transfers in flight at once (IoPool). `clock` times the
  // pause of writes after an I/O error (`error_backoff_ms`).
  SsdStage(std::unique_ptr<SsdTier> device, int queue_depth, const Clock* clock,
           int64_t error_backoff_ms, const SsdRecoveryStats& recovery);
  ~SsdStage();
  SsdStage(const SsdStage&) = delete;
  SsdStage& operator=(const SsdStage&) = delete;

  SsdTier& device() { return *device_; }
  // Runs transfers side by side, up to the queue depth.
  IoPool& io() { return *io_; }
  int depth() const { return io_->depth(); }

  // A replica of `blob`; when the last reference goes, the blob is queued to
  // be freed (DrainTrash), unless the stage is closing.
  std::shared_ptr<storage::SsdReplica> MakeReplica(SsdBlob blob);
  // Frees the queued blobs (I/O: never call it under a shard lock).
  void DrainTrash();
  // From now on a released replica's blob stays on disk (the index is dying
  // with the process; the next start recovers it).
  void Close() { closing_.store(true, std::memory_order_relaxed); }

  // Writes `value` under `header`. When the device is full, `make_room(bytes)`
  // is called (with no lock of the stage held) to drop replicas until a blob
  // of `bytes` fits, and the write is tried once more. Counted as a flush; an I/O error
  // pauses writes.
  Result<SsdBlob> Write(const BlobHeader& header, const void* value,
                        const std::function<void(uint64_t footprint)>& make_room);
  // Counts `st` as an I/O error of `what` and pauses new writes for the backoff.
  void NoteError(const Status& st, const char* what);
  // No write pause is running.
  bool Writable() const;

  // The work queue of write-through copies and prefetches (up to the queue
  // depth of them side by side). Posted jobs are dropped before StartQueue
  // and after StopQueue; a droppable one also while kMaxQueued wait.
  static constexpr size_t kMaxQueued = 4096;
  void StartQueue(Scheduler* scheduler);
  void StopQueue();  // drops what is queued, waits for what runs
  void Post(std::function<void()> job, bool droppable);
  void WaitIdle();

  // The device's and the counters' part of TierStats.
  void Fill(TierStats* t) const;

  Counters counters;

 private:
  const std::unique_ptr<SsdTier> device_;
  const std::unique_ptr<IoPool> io_;
  const Clock* const clock_;
  const int64_t error_backoff_ms_;
  const SsdRecoveryStats recovery_;
  std::atomic<bool> closing_{false};
  std::atomic<int64_t> writes_resume_at_{0};
  std::mutex trash_mu_;
  std::vector<SsdBlob> trash_;
  std::mutex queue_mu_;               // guards the pointer, not the queue
  std::shared_ptr<WorkQueue> queue_;  // between StartQueue and StopQueue
};

}  // namespace tierkv

#endif  // TIERKV_STORE_SSD_STAGE_H_
