#include "client/reply_spin.h"

#include <gtest/gtest.h>

#include "protocol/frame.h"

namespace tierkv {
namespace {

constexpr auto kExist = static_cast<uint16_t>(proto::Opcode::kBatchExist);
constexpr auto kGet = static_cast<uint16_t>(proto::Opcode::kBatchLease);

TEST(ReplySpin, AKindNotYetSeenIsPolledForTheFirstWindow) {
  ReplySpin spin(400);
  EXPECT_EQ(spin.WindowUs(kExist), ReplySpin::kFirstUs);
  ReplySpin small(30);
  EXPECT_EQ(small.WindowUs(kExist), 30);  // never past the cap
}

TEST(ReplySpin, PollsForTwiceTheAverageReplyPlusTheMargin) {
  ReplySpin spin(400);
  for (int i = 0; i < 20; ++i) spin.Record(kExist, 60);
  EXPECT_EQ(spin.WindowUs(kExist), 2 * 60 + ReplySpin::kMarginUs);
  // Another kind keeps its own average.
  EXPECT_EQ(spin.WindowUs(kGet), ReplySpin::kFirstUs);
  for (int i = 0; i < 20; ++i) spin.Record(kGet, 10);
  EXPECT_EQ(spin.WindowUs(kGet), 2 * 10 + ReplySpin::kMarginUs);
  EXPECT_EQ(spin.WindowUs(kExist), 2 * 60 + ReplySpin::kMarginUs);
}

TEST(ReplySpin, AWindowNeverPassesTheCap) {
  ReplySpin spin(100);
  for (int i = 0; i < 20; ++i) spin.Record(kExist, 90);
  EXPECT_EQ(spin.WindowUs(kExist), 100);
}

TEST(ReplySpin, AKindSlowerThanTheCapIsNotPolledUntilItsRepliesComeFasterAgain) {
  ReplySpin spin(400);
  spin.Record(kExist, 5000);
  EXPECT_EQ(spin.WindowUs(kExist), 0);
  int replies = 0;
  while (spin.WindowUs(kExist) == 0 && replies < 100) {
    spin.Record(kExist, 30);
    ++replies;
  }
  EXPECT_GT(replies, 1);  // one fast reply does not undo a slow average at once
  EXPECT_LT(replies, 20);
  EXPECT_GT(spin.WindowUs(kExist), 0);
}

TEST(ReplySpin, OneVeryLongReplyWeighsAsASecondAtMost) {
  ReplySpin spin(400);
  spin.Record(kExist, 40);
  spin.Record(kExist, 3'600'000'000LL);  // an hour
  int replies = 0;
  while (spin.WindowUs(kExist) == 0 && replies < 200) {
    spin.Record(kExist, 40);
    ++replies;
  }
  EXPECT_LT(replies, 50);
}

TEST(ReplySpin, ACapOfZeroNeverPolls) {
  ReplySpin spin(0);
  EXPECT_EQ(spin.WindowUs(kExist), 0);
  spin.Record(kExist, 10);
  EXPECT_EQ(spin.WindowUs(kExist), 0);
}

TEST(ReplySpin, OpcodesPastTheTableShareItsLastSlot) {
  ReplySpin spin(400);
  for (int i = 0; i < 20; ++i) spin.Record(0xFFFF, 70);
  EXPECT_EQ(spin.WindowUs(0xFFFE), 2 * 70 + ReplySpin::kMarginUs);
  EXPECT_EQ(spin.WindowUs(kExist), ReplySpin::kFirstUs);
}

}  // namespace
}  // namespace tierkv
