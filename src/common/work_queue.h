// WorkQueue: the seam of background jobs. A component posts jobs; the queue
// runs them in order, off the poster's thread. The real one (from
// ThreadScheduler()->Queue) has a worker thread of its own; a test's
// ManualScheduler hands out queues whose jobs run on the test's thread, in
// RunQueued (or WaitIdle). With Scheduler::Every and the Clock this is a
// component's whole view of threads and time (common/scheduler.h).
//
// Thread-safety: Post, WaitIdle and queued from any thread, a job included.
// Stop (and the destructor, which calls it) drops the jobs still queued and
// waits for those running: never call it from inside one of the queue's
// jobs, or while holding a lock its jobs take.
#ifndef TIERKV_COMMON_WORK_QUEUE_H_
#define TIERKV_COMMON_WORK_QUEUE_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace tierkv {

struct WorkQueueOptions {
  // A job posted as droppable is dropped while this many jobs are queued
  // (0: never). Other jobs are always queued.
  size_t max_queued = 0;
  // Up to this many queued jobs are taken at once and handed to run_batch
  // together (which may run them side by side).
  size_t max_batch = 1;
  // Runs a batch; null: one after the other on the queue's thread.
  std::function<void(std::vector<std::function<void()>>&)> run_batch = nullptr;
};

class WorkQueue {
 public:
  using Job = std::function<void()>;
  virtual ~WorkQueue() = default;
  // Queues `job`. False when it was dropped instead: droppable while the
  // queue is full (WorkQueueOptions::max_queued), or posted during the
  // queue's destruction.
  virtual bool Post(Job job, bool droppable = false) = 0;
  // Returns once no job is queued or running (jobs posted meanwhile
  // included), or the queue is stopped.
  virtual void WaitIdle() = 0;
  // Jobs queued and not started.
  virtual size_t queued() const = 0;
  // Drops the jobs queued, waits for those running, and refuses every job
  // posted after (Post returns false, WaitIdle returns at once). Idempotent.
  virtual void Stop() = 0;
};

// The rules every WorkQueue follows, for its implementations (the real queue
// and the ManualScheduler's): admission, batching and running a batch.
namespace work_queue {
// Whether a job posted while `queued` jobs wait is queued.
bool Admits(const WorkQueueOptions& options, size_t queued, bool droppable);
// Moves the next batch (up to max_batch jobs, at least one) out of `jobs`.
std::vector<WorkQueue::Job> TakeBatch(const WorkQueueOptions& options,
                                      std::deque<WorkQueue::Job>& jobs);
// Runs `batch` through run_batch, or one job after the other.
void RunBatch(const WorkQueueOptions& options, std::vector<WorkQueue::Job>& batch);
}  // namespace work_queue

// The real queue, with a worker thread of its own; Scheduler::Queue of
// ThreadScheduler() returns one.
std::unique_ptr<WorkQueue> MakeThreadWorkQueue(WorkQueueOptions options);

}  // namespace tierkv

#endif  // TIERKV_COMMON_WORK_QUEUE_H_
