// Scheduler: the seam of background work. A component asks for a task that
// runs `tick` every `period` (and soon after Wake), or for a WorkQueue of
// jobs (common/work_queue.h); the real scheduler gives each a thread of its
// own, a test's ManualScheduler runs due ticks and queued jobs on the test's
// thread when told, on a ManualClock. With the Clock seam (common/clock.h)
// this is the component's whole view of time and threads, so tests neither
// sleep nor race a background thread.
//
// Thread-safety: Every, Queue, Wake and the task's destruction from any thread.
// A task's destructor stops it and waits for a tick in progress: never
// destroy a task from inside its own tick, or while holding a lock its tick
// takes.
#ifndef TIERKV_COMMON_SCHEDULER_H_
#define TIERKV_COMMON_SCHEDULER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

#include "common/clock.h"
#include "common/work_queue.h"

namespace tierkv {

class PeriodicTask {
 public:
  virtual ~PeriodicTask() = default;
  // Runs the tick soon, without waiting for the period to pass.
  virtual void Wake() = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::unique_ptr<PeriodicTask> Every(std::chrono::milliseconds period,
                                              std::function<void()> tick) = 0;
  virtual std::unique_ptr<WorkQueue> Queue(WorkQueueOptions options) = 0;
};

// A thread per task. Never null; lives forever.
Scheduler* ThreadScheduler();

// Tasks that run only in RunDue, on the caller's thread: each one woken, or
// whose period has passed on `clock` since it last ran (or was made). Queues
// whose jobs run only in RunQueued, or in their own WaitIdle, on the caller's
// thread.
class ManualScheduler final : public Scheduler {
 public:
  explicit ManualScheduler(const Clock* clock) : clock_(clock) {}
  std::unique_ptr<PeriodicTask> Every(std::chrono::milliseconds period,
                                      std::function<void()> tick) override;
  std::unique_ptr<WorkQueue> Queue(WorkQueueOptions options) override;
  // Runs every due task once; how many ran.
  size_t RunDue();
  // Runs the jobs of every queue, those they post included, until none is
  // left; how many ran.
  size_t RunQueued();
  // Tasks alive now.
  size_t tasks() const;

 private:
  class Task;
  class ManualQueue;
  const Clock* const clock_;
  mutable std::mutex mu_;
  std::list<Task*> tasks_;
  std::list<ManualQueue*> queues_;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_SCHEDULER_H_
