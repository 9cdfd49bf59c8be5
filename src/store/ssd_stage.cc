#include "store/ssd_stage.h"

#include <spdlog/spdlog.h>

namespace tierkv {

SsdStage::SsdStage(std::unique_ptr<SsdTier> device, int queue_depth, const Clock* clock,
                   int64_t error_backoff_ms, const SsdRecoveryStats& recovery)
    : device_(std::move(device)),
      io_(std::make_unique<IoPool>(queue_depth)),
      clock_(clock),
      error_backoff_ms_(error_backoff_ms),
      recovery_(recovery) {}

SsdStage::~SsdStage() { StopQueue(); }

std::shared_ptr<storage::SsdReplica> SsdStage::MakeReplica(SsdBlob blob) {
  return std::shared_ptr<storage::SsdReplica>(new storage::SsdReplica{std::move(blob)},
                                              [this](storage::SsdReplica* r) {
                                                if (!closing_.load(std::memory_order_relaxed)) {
                                                  std::lock_guard<std::mutex> lock(trash_mu_);
                                                  trash_.push_back(std::move(r->blob));
                                                }
                                                delete r;
                                              });
}

void SsdStage::DrainTrash() {
  std::vector<SsdBlob> blobs;
  {
    std::lock_guard<std::mutex> lock(trash_mu_);
    if (trash_.empty()) return;
    blobs.swap(trash_);
  }
  for (const SsdBlob& b : blobs) {
    if (Status st = device_->Free(b); !st.ok()) NoteError(st, "free");
  }
}

void SsdStage::NoteError(const Status& st, const char* what) {
  counters.io_errors.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = clock_->NowNanos();
  const int64_t resume = now + error_backoff_ms_ * 1'000'000;
  const int64_t before = writes_resume_at_.exchange(resume);
  if (before <= now) {
    counters.write_pauses.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("SSD tier: {} failed ({}); no new SSD writes for {} ms", what, st.ToString(),
                  error_backoff_ms_);
  }
}

bool SsdStage::Writable() const {
  return clock_->NowNanos() >= writes_resume_at_.load(std::memory_order_relaxed);
}

Result<SsdBlob> SsdStage::Write(const BlobHeader& header, const void* value,
                                const std::function<void(uint64_t footprint)>& make_room) {
  const uint64_t footprint = BlobFootprint(header.size);
  if (footprint > device_->Stats().capacity) {  // never fits: evict nothing for it
    counters.flush_failed.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kNoSpace, "object larger than the SSD tier");
  }
  for (int attempt = 0;; ++attempt) {
    Result<SsdBlob> r = device_->Write(header, value);
    if (r.ok()) {
      counters.flush_blobs.fetch_add(1, std::memory_order_relaxed);
      counters.flush_bytes.fetch_add(header.size, std::memory_order_relaxed);
      return r;
    }
    if (r.code() != Code::kNoSpace || attempt == 1) {
      counters.flush_failed.fetch_add(1, std::memory_order_relaxed);
      if (r.code() == Code::kIoError) NoteError(r.status(), "write");
      return r;
    }
    make_room(footprint);
  }
}

void SsdStage::StartQueue(Scheduler* scheduler) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (queue_) return;
  queue_ = scheduler->Queue(
      {.max_queued = kMaxQueued,
       .max_batch = static_cast<size_t>(io_->depth()),
       .run_batch = [this](std::vector<std::function<void()>>& jobs) { io_->RunAll(jobs); }});
}

void SsdStage::StopQueue() {
  std::shared_ptr<WorkQueue> queue;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue = std::move(queue_);
  }
  // Queued copies and prefetches are only optimisations: dropped. Not under
  // queue_mu_, which a running job takes to post another.
  if (queue) queue->Stop();
}

void SsdStage::Post(std::function<void()> job, bool droppable) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (queue_ && !queue_->Post(std::move(job), droppable) && droppable) {
    // The copy is made when the object is demoted instead.
    counters.write_through_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void SsdStage::WaitIdle() {
  std::shared_ptr<WorkQueue> queue;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue = queue_;
  }
  if (queue) queue->WaitIdle();
}

void SsdStage::Fill(TierStats* t) const {
  t->enabled = true;
  t->engine = std::string(device_->file().engine());
  t->direct = device_->file().direct();
  t->ssd = device_->Stats();
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  t->flush_blobs = get(counters.flush_blobs);
  t->flush_bytes = get(counters.flush_bytes);
  t->flush_failed = get(counters.flush_failed);
  t->demoted = get(counters.demoted);
  t->rewarm = get(counters.rewarm);
  t->rewarm_failed = get(counters.rewarm_failed);
  t->rewarm_bytes = get(counters.rewarm_bytes);
  t->rewarm_bytes_current = get(counters.rewarm_bytes_current);
  t->rewarm_waiting = get(counters.rewarm_waiting);
  t->get_hits_ssd = get(counters.get_hits_ssd);
  t->ssd_evicted_objects = get(counters.ssd_evicted_objects);
  t->ssd_evicted_bytes = get(counters.ssd_evicted_bytes);
  t->io_errors = get(counters.io_errors);
  t->corrupt_blobs = get(counters.corrupt_blobs);
  t->writes_paused = !Writable();
  t->write_pauses = get(counters.write_pauses);
  t->prefetch_scheduled = get(counters.prefetch_scheduled);
  t->write_through_dropped = get(counters.write_through_dropped);
  t->recovered = recovery_;
}

}  // namespace tierkv
