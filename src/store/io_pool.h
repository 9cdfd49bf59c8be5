// IoPool: runs blocking SSD transfers side by side, so that the demotion of
// several victims, the rewarms of a batch get and queued prefetches keep up to
// `depth` transfers in flight on the SSD tier's engine.
//
// A call runs its jobs on the calling thread and on the pool's depth - 1
// helper threads. The caller always works on its own jobs, so a call finishes
// even when every helper is blocked (a helper's job may itself wait for a lock
// the caller holds, or call RunAll). Concurrent callers share the helpers: at
// most depth - 1 + (number of callers) jobs run at once.
//
// Thread-safety: RunAll may be called from any thread, including from a job.
#ifndef TIERKV_STORE_IO_POOL_H_
#define TIERKV_STORE_IO_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace tierkv {

class IoPool {
 public:
  // depth >= 1 (smaller is taken as 1). With depth 1 no thread is started:
  // RunAll runs the jobs one after another on the calling thread.
  explicit IoPool(int depth);
  ~IoPool();  // callers must have returned
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  int depth() const { return depth_; }
  // Runs every job and returns when all have finished.
  void RunAll(std::span<const std::function<void()>> jobs);

 private:
  struct Batch {
    std::span<const std::function<void()>> jobs;
    size_t next = 0;  // the first job nobody has taken
    size_t left = 0;  // jobs not finished
    std::condition_variable done;
  };
  // Takes the next job of `b` (mu_ held); the batch leaves the queue with it.
  size_t TakeLocked(Batch* b);
  void Loop();

  const int depth_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Batch*> open_;  // batches with jobs nobody has taken
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_IO_POOL_H_
