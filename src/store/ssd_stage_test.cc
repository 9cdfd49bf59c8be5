// SsdStage on an in-memory device: the write pause after an I/O error (on a
// manual clock), make_room when the device is full, the trash of released
// replicas, and the queue on a manual scheduler.
#include "store/ssd_stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "media/mem_block_file.h"

namespace tierkv {
namespace {

class SsdStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = std::make_unique<MemBlockFile>(uint64_t{1} << 20);
    file_ = file.get();
    std::vector<SsdBlob> recovered;
    SsdRecoveryStats stats;
    auto device = SsdTier::Open(std::move(file), &recovered, &stats);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    stage_ = std::make_unique<SsdStage>(std::move(*device), 2, &clock_, /*backoff_ms=*/1000, stats);
  }
  static BlobHeader Header(const std::string& key, uint64_t size) {
    BlobHeader h;
    h.tenant = "t";
    h.key = key;
    h.size = size;
    return h;
  }

  ManualClock clock_;
  MemBlockFile* file_ = nullptr;
  std::unique_ptr<SsdStage> stage_;
};

TEST_F(SsdStageTest, AnIoErrorPausesWritesForTheBackoffOnTheClock) {
  file_->fail_write = [](int, uint64_t) { return true; };
  const std::string value(4096, 'v');
  Result<SsdBlob> w = stage_->Write(Header("k", value.size()), value.data(), [](uint64_t) {});
  EXPECT_EQ(w.code(), Code::kIoError);
  EXPECT_FALSE(stage_->Writable());
  TierStats t;
  stage_->Fill(&t);
  EXPECT_EQ(t.io_errors, 1u);
  EXPECT_EQ(t.write_pauses, 1u);
  EXPECT_EQ(t.flush_failed, 1u);
  EXPECT_TRUE(t.writes_paused);
  clock_.AdvanceMillis(999);
  EXPECT_FALSE(stage_->Writable());
  clock_.AdvanceMillis(1);
  EXPECT_TRUE(stage_->Writable());
}

TEST_F(SsdStageTest, AFullDeviceAsksForRoomOnceAndReleasedReplicasAreFreedFromTheTrash) {
  const std::string value(64 << 10, 'v');
  std::vector<std::shared_ptr<storage::SsdReplica>> held;
  for (int i = 0;; ++i) {
    bool asked = false;
    Result<SsdBlob> w = stage_->Write(Header("k" + std::to_string(i), value.size()), value.data(),
                                      [&](uint64_t footprint) {
                                        EXPECT_GE(footprint, value.size());
                                        asked = true;
                                      });
    if (!w.ok()) {
      EXPECT_EQ(w.code(), Code::kNoSpace);
      EXPECT_TRUE(asked);  // nothing was dropped for it: it stays full
      break;
    }
    EXPECT_FALSE(asked);
    held.push_back(stage_->MakeReplica(std::move(*w)));
    ASSERT_LT(i, 100);
  }
  const uint64_t full = stage_->device().Stats().allocated;
  held.pop_back();  // the last reference: its blob goes to the trash
  EXPECT_EQ(stage_->device().Stats().allocated, full);
  stage_->DrainTrash();
  EXPECT_LT(stage_->device().Stats().allocated, full);
  // Once closing, a released replica's blob stays on disk.
  const uint64_t before = stage_->device().Stats().allocated;
  stage_->Close();
  held.pop_back();
  stage_->DrainTrash();
  EXPECT_EQ(stage_->device().Stats().allocated, before);
}

TEST_F(SsdStageTest, JobsRunOnlyBetweenStartAndStopAndADroppableOneIsCountedWhenDropped) {
  ManualScheduler scheduler(&clock_);
  std::atomic<int> ran{0};              // a batch's jobs run side by side on the I/O pool
  stage_->Post([&] { ++ran; }, false);  // not started: dropped
  stage_->StartQueue(&scheduler);
  for (size_t i = 0; i < SsdStage::kMaxQueued; ++i) stage_->Post([&] { ++ran; }, true);
  stage_->Post([&] { ++ran; }, true);  // full: dropped and counted
  stage_->Post([&] { ++ran; }, false);
  stage_->WaitIdle();  // runs them here
  EXPECT_EQ(ran.load(), static_cast<int>(SsdStage::kMaxQueued) + 1);
  TierStats t;
  stage_->Fill(&t);
  EXPECT_EQ(t.write_through_dropped, 1u);
  stage_->StopQueue();
  stage_->Post([&] { ++ran; }, false);
  stage_->WaitIdle();
  EXPECT_EQ(ran.load(), static_cast<int>(SsdStage::kMaxQueued) + 1);
}

}  // namespace
}  // namespace tierkv
