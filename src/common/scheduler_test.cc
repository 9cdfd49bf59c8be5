#include "common/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace tierkv {
namespace {

using std::chrono::milliseconds;

TEST(ManualSchedulerTest, ATaskRunsWhenItsPeriodPassedOrItWasWoken) {
  ManualClock clock;
  ManualScheduler s(&clock);
  int runs = 0;
  auto task = s.Every(milliseconds(20), [&] { ++runs; });
  EXPECT_EQ(s.RunDue(), 0u);
  clock.AdvanceMillis(19);
  EXPECT_EQ(s.RunDue(), 0u);
  clock.AdvanceMillis(1);
  EXPECT_EQ(s.RunDue(), 1u);
  EXPECT_EQ(s.RunDue(), 0u);  // the period starts again from the run
  task->Wake();
  EXPECT_EQ(s.RunDue(), 1u);
  EXPECT_EQ(runs, 2);
  task.reset();
  EXPECT_EQ(s.tasks(), 0u);
  clock.AdvanceMillis(100);
  EXPECT_EQ(s.RunDue(), 0u);
}

TEST(ManualSchedulerTest, ATickMayWakeATask) {
  ManualClock clock;
  ManualScheduler s(&clock);
  int b_runs = 0;
  auto b = s.Every(milliseconds(1000), [&] { ++b_runs; });
  auto a = s.Every(milliseconds(10), [&] { b->Wake(); });
  clock.AdvanceMillis(10);
  EXPECT_EQ(s.RunDue(), 1u);  // a, which wakes b for the next round
  EXPECT_EQ(s.RunDue(), 1u);  // b
  EXPECT_EQ(b_runs, 1);
}

TEST(ThreadSchedulerTest, AWokenTaskRunsOnItsThreadAndStopsWithItsHandle) {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0;
  auto task = ThreadScheduler()->Every(milliseconds(60'000), [&] {
    std::lock_guard<std::mutex> lock(mu);
    ++runs;
    cv.notify_all();
  });
  task->Wake();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return runs == 1; }));
  }
  task.reset();  // joins; no tick after this
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace tierkv
