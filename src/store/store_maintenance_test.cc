// The store's maintenance pass as its scheduler runs it: on a ManualScheduler
// over the test's manual clock, no thread and no sleep.
#include <gtest/gtest.h>

#include <string>

#include "common/scheduler.h"
#include "store/store_test_util.h"

namespace tierkv {
namespace {

class StoreMaintenanceTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.scheduler = &scheduler_;
    o.maintenance_interval_ms = 20;
    o.lease_ms = 100;
    Make(16 * kMiB, o);
  }
  void TearDown() override { store_->Stop(); }
  static std::string Key(int i) { return "k" + std::to_string(i); }

  ManualScheduler scheduler_{&clock_};
};

TEST_F(StoreMaintenanceTest, APutAboveTheHighWatermarkWakesTheEvictionPass) {
  store_->Start();
  EXPECT_EQ(scheduler_.tasks(), 1u);
  for (int i = 0; i < 14; ++i) {
    ASSERT_TRUE(Put(Key(i), "v", kMiB).ok());
    clock_.AdvanceMillis(1);
  }
  EXPECT_EQ(scheduler_.RunDue(), 0u);         // 87.5 %: nothing woke it, its period has not passed
  ASSERT_TRUE(Put(Key(14), "v", kMiB).ok());  // 93.75 %: woken
  EXPECT_EQ(Used(), 15 * kMiB);
  EXPECT_EQ(scheduler_.RunDue(), 1u);
  EXPECT_EQ(Used(), 12 * kMiB);  // down to the low watermark
  EXPECT_EQ(Get(Key(0)).code(), Code::kNotFound);
}

TEST_F(StoreMaintenanceTest, ThePeriodicPassExpiresLeasesOnTheManualClock) {
  store_->Start();
  ASSERT_TRUE(Put("k", "v").ok());
  ASSERT_TRUE(store_->Lease({}, {"default", "k"}).ok());
  EXPECT_EQ(store_->admin().Stats().active_leases, 1u);
  clock_.AdvanceMillis(19);
  EXPECT_EQ(scheduler_.RunDue(), 0u);
  clock_.AdvanceMillis(101);  // past the lease and the period
  EXPECT_EQ(scheduler_.RunDue(), 1u);
  EXPECT_EQ(store_->admin().Stats().expired_leases, 1u);
  EXPECT_EQ(store_->admin().Stats().active_leases, 0u);
}

TEST_F(StoreMaintenanceTest, StopEndsThePeriodicPass) {
  store_->Start();
  store_->Start();  // once
  EXPECT_EQ(scheduler_.tasks(), 1u);
  store_->Stop();
  EXPECT_EQ(scheduler_.tasks(), 0u);
  clock_.AdvanceMillis(1000);
  EXPECT_EQ(scheduler_.RunDue(), 0u);
}

}  // namespace
}  // namespace tierkv
