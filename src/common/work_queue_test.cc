#include "common/work_queue.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/scheduler.h"

namespace tierkv {
namespace {

// A gate a job waits on until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  void Enter() {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(ThreadWorkQueueTest, JobsRunInOrderOffThePostersThread) {
  auto q = ThreadScheduler()->Queue({});
  std::mutex mu;
  std::vector<int> ran;
  std::thread::id worker;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(q->Post([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(i);
      worker = std::this_thread::get_id();
    }));
  }
  q->WaitIdle();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_EQ(q->queued(), 0u);
}

TEST(ThreadWorkQueueTest, ADroppableJobIsDroppedWhileTheQueueIsFullOthersNever) {
  auto q = ThreadScheduler()->Queue({.max_queued = 2});
  Gate gate;
  ASSERT_TRUE(q->Post([&] { gate.Enter(); }));  // running, not queued
  gate.WaitEntered();
  int ran = 0;
  EXPECT_TRUE(q->Post([&] { ++ran; }, /*droppable=*/true));
  EXPECT_TRUE(q->Post([&] { ++ran; }, /*droppable=*/true));
  EXPECT_FALSE(q->Post([&] { ++ran; }, /*droppable=*/true));  // two queued: full
  EXPECT_TRUE(q->Post([&] { ++ran; }));                       // not droppable
  EXPECT_EQ(q->queued(), 3u);
  gate.Open();
  q->WaitIdle();
  EXPECT_EQ(ran, 3);
}

TEST(ThreadWorkQueueTest, BatchesGoToRunBatchAndDestructionDropsWhatIsQueued) {
  Gate gate;
  std::mutex mu;
  std::vector<size_t> batches;
  int ran = 0;
  auto q = ThreadScheduler()->Queue(
      {.max_batch = 3, .run_batch = [&](std::vector<std::function<void()>>& jobs) {
         {
           std::lock_guard<std::mutex> lock(mu);
           batches.push_back(jobs.size());
         }
         for (auto& job : jobs) job();
       }});
  ASSERT_TRUE(q->Post([&] { gate.Enter(); }));
  gate.WaitEntered();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q->Post([&] { ++ran; }));
  gate.Open();
  q->WaitIdle();
  EXPECT_EQ(ran, 5);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(batches, (std::vector<size_t>{1, 3, 2}));
  }

  Gate second;
  ASSERT_TRUE(q->Post([&] { second.Enter(); }));
  second.WaitEntered();
  ASSERT_TRUE(q->Post([&] { ++ran; }));
  // The running job ends only once Stop has dropped the queued one.
  std::thread opener([&] {
    while (q->queued() != 0) std::this_thread::yield();
    second.Open();
  });
  q->Stop();  // waits for the running job, drops the queued one
  opener.join();
  EXPECT_EQ(ran, 5);
  EXPECT_FALSE(q->Post([&] { ++ran; }));  // refused once stopped
  q->WaitIdle();                          // returns at once
  q.reset();
}

TEST(ManualWorkQueueTest, JobsRunOnlyWhenTheTestRunsThemJobsPostedByJobsToo) {
  ManualClock clock;
  ManualScheduler s(&clock);
  auto a = s.Queue({});
  auto b = s.Queue({.max_queued = 1});
  std::vector<std::string> ran;
  ASSERT_TRUE(a->Post([&] {
    ran.push_back("a1");
    b->Post([&] { ran.push_back("b2"); });
  }));
  ASSERT_TRUE(b->Post([&] { ran.push_back("b1"); }, true));
  EXPECT_FALSE(b->Post([&] { ran.push_back("dropped"); }, true));
  EXPECT_TRUE(ran.empty());
  EXPECT_EQ(s.RunQueued(), 3u);
  EXPECT_EQ(ran, (std::vector<std::string>{"a1", "b1", "b2"}));
  ASSERT_TRUE(a->Post([&] { ran.push_back("a2"); }));
  a->WaitIdle();  // runs it here
  EXPECT_EQ(ran.back(), "a2");
  EXPECT_EQ(s.RunQueued(), 0u);
}

}  // namespace
}  // namespace tierkv
