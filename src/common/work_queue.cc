// The real WorkQueue: one worker thread per queue (ThreadScheduler()->Queue).
#include "common/work_queue.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "common/scheduler.h"

namespace tierkv {

class ThreadWorkQueue final : public WorkQueue {
 public:
  explicit ThreadWorkQueue(WorkQueueOptions options)
      : options_(std::move(options)), thread_([this] { Loop(); }) {}
  ~ThreadWorkQueue() override { Stop(); }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      jobs_.clear();
    }
    cv_.notify_all();
    idle_cv_.notify_all();
    std::lock_guard<std::mutex> lock(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

  bool Post(Job job, bool droppable) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return false;
      if (!work_queue::Admits(options_, jobs_.size(), droppable)) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  void WaitIdle() override {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [this] { return stopping_ || (jobs_.empty() && running_ == 0); });
  }

  size_t queued() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      std::vector<Job> batch = work_queue::TakeBatch(options_, jobs_);
      running_ += batch.size();
      lock.unlock();
      work_queue::RunBatch(options_, batch);
      lock.lock();
      running_ -= batch.size();
      if (jobs_.empty() && running_ == 0) idle_cv_.notify_all();
    }
  }

  const WorkQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Job> jobs_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::mutex join_mu_;  // one Stop joins, the others wait for it
  std::thread thread_;  // last: starts once the rest is built
};

namespace work_queue {

bool Admits(const WorkQueueOptions& options, size_t queued, bool droppable) {
  return !droppable || options.max_queued == 0 || queued < options.max_queued;
}

std::vector<WorkQueue::Job> TakeBatch(const WorkQueueOptions& options,
                                      std::deque<WorkQueue::Job>& jobs) {
  std::vector<WorkQueue::Job> batch;
  const size_t limit = std::max<size_t>(options.max_batch, 1);
  while (!jobs.empty() && batch.size() < limit) {
    batch.push_back(std::move(jobs.front()));
    jobs.pop_front();
  }
  return batch;
}

void RunBatch(const WorkQueueOptions& options, std::vector<WorkQueue::Job>& batch) {
  if (batch.empty()) return;
  if (options.run_batch) {
    options.run_batch(batch);
  } else {
    for (WorkQueue::Job& job : batch) job();
  }
}

}  // namespace work_queue

std::unique_ptr<WorkQueue> MakeThreadWorkQueue(WorkQueueOptions options) {
  return std::make_unique<ThreadWorkQueue>(std::move(options));
}

}  // namespace tierkv
