#include "store/pin_budgets.h"

#include <gtest/gtest.h>

#include "store/quarantine.h"

namespace tierkv {
namespace {

TEST(PinBudgetsTest, AReplicaIsChargedOncePerOwnerAndGivenBackWithItsLastPin) {
  PinBudgets pins;
  int r1 = 0, r2 = 0;  // two replicas' addresses
  uint64_t next = 1;
  auto id = [&] { return next++; };
  const uint64_t a = pins.Add(7, &r1, 100, 250, id).value();
  const uint64_t b = pins.Add(7, &r1, 100, 250, id).value();  // the same replica again
  EXPECT_EQ(pins.Bytes(7), 100u);
  EXPECT_EQ(pins.Add(7, &r2, 200, 250, id).status().code(), Code::kNoSpace);  // 300 > 250
  EXPECT_EQ(next, 3u);  // no id spent on the refusal
  EXPECT_EQ(pins.Add(8, &r2, 200, 250, id).status().code(), Code::kOk);  // another owner
  pins.Remove(7, &r1, 100, a);
  EXPECT_EQ(pins.Bytes(7), 100u);  // b still holds it
  EXPECT_EQ(pins.Ids(7), std::vector<uint64_t>{b});
  pins.Remove(7, &r1, 100, b);
  EXPECT_EQ(pins.Bytes(7), 0u);
  EXPECT_TRUE(pins.Ids(7).empty());
  EXPECT_EQ(pins.Add(7, &r2, 200, 0, id).status().code(), Code::kOk);  // 0: unlimited
}

TEST(QuarantineTest, RangesAreHeldPerSessionUntilItEnds) {
  Quarantine q;
  q.Hold(1, {{0, 4096}, 100});
  q.Hold(1, {{8192, 8192}, 5000});
  q.Hold(2, {{65536, 4096}, 1});
  EXPECT_EQ(q.bytes(), 16384u);
  std::vector<Quarantine::Range> one = q.Release(1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[1].first.offset, 8192u);
  EXPECT_EQ(one[1].second, 5000u);
  EXPECT_EQ(q.bytes(), 4096u);
  EXPECT_TRUE(q.Release(1).empty());
  EXPECT_EQ(q.Release(2).size(), 1u);
  EXPECT_EQ(q.bytes(), 0u);
}

}  // namespace
}  // namespace tierkv
