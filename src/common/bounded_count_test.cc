// BoundedCount: at most max slots at once; a slot leaves when it goes, also
// after a move.
#include "common/bounded_count.h"

#include <gtest/gtest.h>

#include <vector>

namespace tierkv {
namespace {

TEST(BoundedCount, AtMostMaxSlotsAndALeavingSlotFreesItsPlace) {
  BoundedCount count(2);
  std::vector<BoundedCount::Slot> held;
  for (int i = 0; i < 2; ++i) {
    std::optional<BoundedCount::Slot> s = count.TryEnter();
    ASSERT_TRUE(s.has_value());
    held.push_back(std::move(*s));  // a moved slot still holds its place
  }
  EXPECT_FALSE(count.TryEnter().has_value());
  EXPECT_FALSE(count.TryEnter().has_value());  // a refusal takes no place
  held.pop_back();
  std::optional<BoundedCount::Slot> again = count.TryEnter();
  EXPECT_TRUE(again.has_value());
  EXPECT_FALSE(count.TryEnter().has_value());
  again.reset();
  held.clear();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(count.TryEnter().has_value());  // each leaves at once
}

}  // namespace
}  // namespace tierkv
