// Scheduler: the seam of periodic background work. A component asks for a
// task that runs `tick` every `period` (and soon after Wake); the real
// scheduler gives it a thread of its own, a test's ManualScheduler runs due
// ticks on the test's thread when told, on a ManualClock. With the Clock
// seam (common/clock.h) this is the component's whole view of time and
// threads, so tests neither sleep nor race a background thread.
//
// Thread-safety: Every, Wake and the task's destruction from any thread.
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
};

// A thread per task. Never null; lives forever.
Scheduler* ThreadScheduler();

// Tasks that run only in RunDue, on the caller's thread: each one woken, or
// whose period has passed on `clock` since it last ran (or was made).
class ManualScheduler final : public Scheduler {
 public:
  explicit ManualScheduler(const Clock* clock) : clock_(clock) {}
  std::unique_ptr<PeriodicTask> Every(std::chrono::milliseconds period,
                                      std::function<void()> tick) override;
  // Runs every due task once; how many ran.
  size_t RunDue();
  // Tasks alive now.
  size_t tasks() const;

 private:
  class Task;
  const Clock* const clock_;
  mutable std::mutex mu_;
  std::list<Task*> tasks_;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_SCHEDULER_H_
