#include "store/io_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tierkv {
namespace {

// Jobs meet in groups of `group`: each waits (at most 10 s) until the whole
// group has arrived. Records how many ran at once.
class Rendezvous {
 public:
  explicit Rendezvous(int group) : group_(group) {}
  void Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    const int me = arrived_++;
    max_running_ = std::max(max_running_, ++running_);
    const int needed = (me / group_ + 1) * group_;
    cv_.notify_all();
    met_all_ &= cv_.wait_for(lock, std::chrono::seconds(10), [&] { return arrived_ >= needed; });
    --running_;
  }
  int max_running() const { return max_running_; }
  bool met_all() const { return met_all_; }

 private:
  const int group_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0, running_ = 0, max_running_ = 0;
  bool met_all_ = true;
};

TEST(IoPool, RunsDepthJobsAtOnceAndNeverMore) {
  IoPool pool(4);
  Rendezvous meet(4);
  std::vector<std::function<void()>> jobs(12, [&] { meet.Arrive(); });
  pool.RunAll(jobs);
  EXPECT_TRUE(meet.met_all());  // four at a time really ran together
  EXPECT_EQ(meet.max_running(), 4);
}

TEST(IoPool, ConcurrentCallersShareTheHelpersAndAllFinish) {
  IoPool pool(2);  // one helper
  Rendezvous meet(2);
  std::atomic<int> done{0};
  std::vector<std::function<void()>> jobs(6, [&] {
    meet.Arrive();
    ++done;
  });
  std::thread other([&] { pool.RunAll(jobs); });
  pool.RunAll(jobs);
  other.join();
  EXPECT_EQ(done.load(), 12);
  EXPECT_TRUE(meet.met_all());
  EXPECT_LE(meet.max_running(), 3);  // the helper and the two callers
}

TEST(IoPool, ACallFinishesWhileEveryHelperIsBlocked) {
  IoPool pool(3);  // two helpers
  std::mutex gate;
  std::unique_lock<std::mutex> closed(gate);
  std::atomic<int> blocked{0};
  // Two jobs that block until the gate opens: they hold `other` and a helper.
  std::vector<std::function<void()>> stuck(2, [&] {
    ++blocked;
    std::lock_guard<std::mutex> wait(gate);
  });
  std::thread other([&] { pool.RunAll(stuck); });
  while (blocked.load() < 2) std::this_thread::yield();
  // Another call still runs to the end, with nested calls from its jobs.
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> inner(3, [&] { ++ran; });
  std::vector<std::function<void()>> outer(4, [&] {
    pool.RunAll(inner);
    ++ran;
  });
  pool.RunAll(outer);
  EXPECT_EQ(ran.load(), 16);
  closed.unlock();
  other.join();
}

TEST(IoPool, DepthOneRunsInOrderOnTheCallingThread) {
  IoPool pool(1);
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<std::function<void()>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.emplace_back([&, i] {
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  }
  pool.RunAll(jobs);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  for (auto id : threads) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(IoPool, AnEmptyListReturnsAtOnce) {
  IoPool pool(3);
  pool.RunAll({});
  EXPECT_EQ(pool.depth(), 3);
}

}  // namespace
}  // namespace tierkv
