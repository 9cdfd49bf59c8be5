#include "common/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

namespace tierkv {
namespace {

class ThreadTask final : public PeriodicTask {
 public:
  ThreadTask(std::chrono::milliseconds period, std::function<void()> tick)
      : period_(period), tick_(std::move(tick)), thread_([this] { Loop(); }) {}
  ~ThreadTask() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, period_, [this] { return stop_ || woken_; });
      if (stop_) break;
      woken_ = false;
      lock.unlock();
      tick_();
      lock.lock();
    }
  }

  const std::chrono::milliseconds period_;
  const std::function<void()> tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

class Threads final : public Scheduler {
 public:
  std::unique_ptr<PeriodicTask> Every(std::chrono::milliseconds period,
                                      std::function<void()> tick) override {
    return std::make_unique<ThreadTask>(period, std::move(tick));
  }
  std::unique_ptr<WorkQueue> Queue(WorkQueueOptions options) override {
    return MakeThreadWorkQueue(std::move(options));
  }
};

}  // namespace

Scheduler* ThreadScheduler() {
  static Threads* const threads = new Threads();
  return threads;
}

class ManualScheduler::Task final : public PeriodicTask {
 public:
  Task(ManualScheduler* owner, std::chrono::milliseconds period, std::function<void()> tick)
      : owner_(owner),
        period_ns_(std::chrono::nanoseconds(period).count()),
        tick(std::move(tick)),
        next_ns(owner->clock_->NowNanos() + period_ns_) {}
  ~Task() override {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    owner_->tasks_.remove(this);
  }
  void Wake() override {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    woken = true;
  }
  void Ran(int64_t now) {
    woken = false;
    next_ns = now + period_ns_;
  }

  ManualScheduler* const owner_;
  const int64_t period_ns_;
  const std::function<void()> tick;
  int64_t next_ns;     // owner_->mu_
  bool woken = false;  // owner_->mu_
};

std::unique_ptr<PeriodicTask> ManualScheduler::Every(std::chrono::milliseconds period,
                                                     std::function<void()> tick) {
  auto task = std::make_unique<Task>(this, period, std::move(tick));
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(task.get());
  return task;
}

size_t ManualScheduler::RunDue() {
  std::vector<Task*> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowNanos();
    for (Task* t : tasks_) {
      if (t->woken || now >= t->next_ns) {
        t->Ran(now);
        due.push_back(t);
      }
    }
  }
  // Ticks run without the lock (a tick may Wake a task); tasks are not
  // destroyed while RunDue runs (the test's thread owns both).
  for (Task* t : due) t->tick();
  return due.size();
}

// Jobs wait until the test runs them (RunQueued, WaitIdle), on its thread, in
// the order posted; batches are handed to run_batch as the real queue would.
class ManualScheduler::ManualQueue final : public WorkQueue {
 public:
  ManualQueue(ManualScheduler* owner, WorkQueueOptions options)
      : owner_(owner), options_(std::move(options)) {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    owner_->queues_.push_back(this);
  }
  ~ManualQueue() override {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    owner_->queues_.remove(this);
  }
  bool Post(Job job, bool droppable) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return false;
    if (!work_queue::Admits(options_, jobs_.size(), droppable)) return false;
    jobs_.push_back(std::move(job));
    return true;
  }
  void WaitIdle() override {
    while (RunBatch() > 0) {
    }
  }
  size_t queued() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
  }
  void Stop() override {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    jobs_.clear();
  }
  // Runs the next batch; how many jobs it held.
  size_t RunBatch() {
    std::vector<Job> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch = work_queue::TakeBatch(options_, jobs_);
    }
    work_queue::RunBatch(options_, batch);
    return batch.size();
  }

 private:
  ManualScheduler* const owner_;
  const WorkQueueOptions options_;
  mutable std::mutex mu_;
  std::deque<Job> jobs_;
  bool stopped_ = false;
};

std::unique_ptr<WorkQueue> ManualScheduler::Queue(WorkQueueOptions options) {
  return std::make_unique<ManualQueue>(this, std::move(options));
}

size_t ManualScheduler::RunQueued() {
  size_t ran = 0;
  for (;;) {
    std::vector<ManualQueue*> queues;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queues.assign(queues_.begin(), queues_.end());
    }
    size_t round = 0;
    for (ManualQueue* q : queues) round += q->RunBatch();
    if (round == 0) return ran;
    ran += round;
  }
}

size_t ManualScheduler::tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

}  // namespace tierkv
