#include "store/io_pool.h"

#include <algorithm>

namespace tierkv {

IoPool::IoPool(int depth) : depth_(std::max(1, depth)) {
  helpers_.reserve(depth_ - 1);
  for (int i = 1; i < depth_; ++i) helpers_.emplace_back([this] { Loop(); });
}

IoPool::~IoPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

size_t IoPool::TakeLocked(Batch* b) {
  const size_t i = b->next++;
  if (b->next == b->jobs.size()) open_.erase(std::find(open_.begin(), open_.end(), b));
  return i;
}

void IoPool::RunAll(std::span<const std::function<void()>> jobs) {
  if (helpers_.empty() || jobs.size() <= 1) {
    for (const auto& job : jobs) job();
    return;
  }
  Batch batch;
  batch.jobs = jobs;
  batch.left = jobs.size();
  std::unique_lock<std::mutex> lock(mu_);
  open_.push_back(&batch);
  ready_.notify_all();
  while (batch.next < jobs.size()) {
    const size_t i = TakeLocked(&batch);
    lock.unlock();
    jobs[i]();
    lock.lock();
    --batch.left;
  }
  batch.done.wait(lock, [&] { return batch.left == 0; });
}

void IoPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !open_.empty(); });
    if (open_.empty()) return;  // stopping
    Batch* b = open_.front();
    const size_t i = TakeLocked(b);
    lock.unlock();
    b->jobs[i]();
    lock.lock();
    if (--b->left == 0) b->done.notify_all();
  }
}

}  // namespace tierkv
