#include "media/checksum.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace tierkv {
namespace {

TEST(ValueChecksum, PiecesHashLikeTheWhole) {
  const std::string v(300000, 'q');
  ValueHasher h;
  h.Update(v.data(), 1000);
  h.Update(v.data() + 1000, v.size() - 1000);
  EXPECT_EQ(h.Digest(), ValueChecksum(v.data(), v.size()));
}

TEST(ValueDigests, KeepsTheWholeValueAndAFewRanges) {
  ValueDigests d;
  constexpr uint64_t kSize = 16 << 20;
  constexpr uint64_t kR = ValueDigests::kMinRange;
  EXPECT_EQ(d.Find(0, kSize, kSize), 0u);  // unknown
  d.Remember(0, kSize, kSize, 11);
  EXPECT_EQ(d.Find(0, kSize, kSize), 11u);
  EXPECT_EQ(d.Find(0, kSize / 2, kSize), 0u);  // a range is not the whole
  for (uint64_t i = 1; i <= ValueDigests::kRanges; ++i) d.Remember(i * kR, kR, kSize, 100 + i);
  for (uint64_t i = 1; i <= ValueDigests::kRanges; ++i) {
    EXPECT_EQ(d.Find(i * kR, kR, kSize), 100 + i);
    EXPECT_EQ(d.Find(i * kR, 2 * kR, kSize), 0u);  // same offset, other length
  }
  d.Remember(kR, kR, kSize, 999);  // already known: kept as it was
  EXPECT_EQ(d.Find(kR, kR, kSize), 101u);
  // One more range than it keeps: the oldest goes, the whole value stays.
  d.Remember(0, kR, kSize, 7);
  EXPECT_EQ(d.Find(0, kR, kSize), 7u);
  EXPECT_EQ(d.Find(kR, kR, kSize), 0u);
  EXPECT_EQ(d.Find(2 * kR, kR, kSize), 102u);
  EXPECT_EQ(d.Find(0, kSize, kSize), 11u);
  // A small range is neither kept nor found; a small whole value is.
  d.Remember(100, 10, kSize, 5);
  EXPECT_EQ(d.Find(100, 10, kSize), 0u);
  EXPECT_EQ(d.Find(2 * kR, kR, kSize), 102u);  // and it took no slot
  ValueDigests tiny;
  tiny.Remember(0, 10, 10, 6);
  EXPECT_EQ(tiny.Find(0, 10, 10), 6u);
}

// Threads racing to record the first range share one table; every range
// recorded is found afterwards.
TEST(ValueDigests, ConcurrentRecordsShareOneTable) {
  for (int round = 0; round < 50; ++round) {
    ValueDigests d;
    std::vector<std::thread> threads;
    for (uint64_t t = 0; t < 4; ++t) {
      threads.emplace_back([&d, t] {
        d.Remember(t * ValueDigests::kMinRange, ValueDigests::kMinRange, 16 << 20, 1 + t);
      });
    }
    for (std::thread& th : threads) th.join();
    for (uint64_t t = 0; t < 4; ++t) {
      ASSERT_EQ(d.Find(t * ValueDigests::kMinRange, ValueDigests::kMinRange, 16 << 20), 1 + t);
    }
  }
}

}  // namespace
}  // namespace tierkv
