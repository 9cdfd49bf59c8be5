#include "media/offset_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tierkv {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(OffsetAllocator, AlignsAndRoundsToClasses) {
  OffsetAllocator a(64 * kMiB);
  EXPECT_EQ(a.ClassSize(1), 4096u);
  EXPECT_EQ(a.ClassSize(4096), 4096u);
  EXPECT_EQ(a.ClassSize(4097), 8192u);
  EXPECT_EQ(a.ClassSize(kMiB), kMiB);
  EXPECT_EQ(a.ClassSize(kMiB + 1), kMiB + kMiB / 8);  // <= 12.5% waste
  for (uint64_t size : {uint64_t{1}, uint64_t{5000}, uint64_t{70000}, 3 * kMiB + 17}) {
    auto e = a.Allocate(size);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->offset % 4096, 0u);
    EXPECT_GE(e->size, size);
    EXPECT_LE(e->size, std::max<uint64_t>(4096, size + size / 8 + 4096));
  }
}

TEST(OffsetAllocator, WithoutSizeClassesOnlyAlignmentRounds) {
  OffsetAllocator a(64 * kMiB, 4096, /*size_classes=*/false);
  EXPECT_EQ(a.ClassSize(kMiB + 1), kMiB + 4096);
  EXPECT_EQ(a.Allocate(kMiB + 4096)->size, kMiB + 4096);
}

TEST(OffsetAllocator, ReserveTakesAnExactRangeOrNothing) {
  OffsetAllocator a(16 * kMiB);
  EXPECT_TRUE(a.Reserve({4 * kMiB, kMiB}, kMiB));
  EXPECT_FALSE(a.Reserve({4 * kMiB + 4096, 4096}, 1));  // already taken
  EXPECT_FALSE(a.Reserve({100, 4096}, 1));              // unaligned
  EXPECT_EQ(a.Stats().free_ranges, 2u);                 // split around it
  EXPECT_EQ(a.Stats().allocated, kMiB);
  a.Free({4 * kMiB, kMiB}, kMiB);
  EXPECT_EQ(a.Stats().free_ranges, 1u);
}

TEST(OffsetAllocator, ExhaustionReturnsNothingAndFreeingRestores) {
  OffsetAllocator a(16 * kMiB);
  std::vector<Extent> got;
  while (auto e = a.Allocate(kMiB)) got.push_back(*e);
  EXPECT_EQ(got.size(), 16u);
  EXPECT_FALSE(a.Allocate(1).has_value());
  EXPECT_EQ(a.Stats().free, 0u);
  a.Free(got.back(), kMiB);
  got.pop_back();
  EXPECT_TRUE(a.Allocate(kMiB).has_value());
  EXPECT_FALSE(a.Allocate(kMiB + 1).has_value());
}

TEST(OffsetAllocator, CoalescesNeighboursBackIntoOneRange) {
  OffsetAllocator a(8 * kMiB);
  std::vector<Extent> got;
  for (int i = 0; i < 8; ++i) got.push_back(*a.Allocate(kMiB));
  // Free in an interleaved order: odd ones first (no neighbours), then even ones.
  for (int i = 1; i < 8; i += 2) a.Free(got[i], kMiB);
  EXPECT_EQ(a.Stats().free_ranges, 4u);
  EXPECT_FALSE(a.Allocate(2 * kMiB).has_value());  // fragmented: no 2 MiB hole
  for (int i = 0; i < 8; i += 2) a.Free(got[i], kMiB);
  AllocatorStats s = a.Stats();
  EXPECT_EQ(s.free_ranges, 1u);
  EXPECT_EQ(s.largest_free, 8 * kMiB);
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.requested, 0u);
  EXPECT_TRUE(a.Allocate(8 * kMiB).has_value());
}

TEST(OffsetAllocator, MeasuresFragmentation) {
  OffsetAllocator a(8 * kMiB);
  std::vector<Extent> got;
  for (int i = 0; i < 8; ++i) got.push_back(*a.Allocate(kMiB));
  EXPECT_DOUBLE_EQ(a.Stats().fragmentation, 0.0);  // nothing free
  a.Free(got[1], kMiB);
  a.Free(got[5], kMiB);
  AllocatorStats s = a.Stats();
  EXPECT_EQ(s.free, 2 * kMiB);
  EXPECT_EQ(s.largest_free, kMiB);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.5);
  EXPECT_EQ(s.live_allocations, 6u);
}

TEST(OffsetAllocator, BestFitPrefersTheSmallestHole) {
  OffsetAllocator a(8 * kMiB);
  std::vector<Extent> got;
  for (int i = 0; i < 8; ++i) got.push_back(*a.Allocate(kMiB));
  a.Free(got[0], kMiB);  // 1 MiB hole at 0
  a.Free(got[3], kMiB);
  a.Free(got[4], kMiB);  // 2 MiB hole at 3 MiB
  auto e = a.Allocate(kMiB);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset, 0u);  // the exact-size hole, not the bigger one
  auto f = a.Allocate(2 * kMiB);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->offset, 3 * kMiB);
}

TEST(OffsetAllocator, RandomWorkloadNeverOverlapsAndAccountsExactly) {
  OffsetAllocator a(64 * kMiB);
  std::mt19937_64 rng(42);
  std::vector<std::pair<Extent, uint64_t>> live;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t size = 1 + rng() % (2 * kMiB);
      if (auto e = a.Allocate(size)) live.emplace_back(*e, size);
    } else {
      const size_t i = rng() % live.size();
      a.Free(live[i].first, live[i].second);
      live[i] = live.back();
      live.pop_back();
    }
  }
  std::vector<Extent> sorted;
  uint64_t allocated = 0, requested = 0;
  for (auto& [e, req] : live) {
    sorted.push_back(e);
    allocated += e.size;
    requested += req;
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Extent& x, const Extent& y) { return x.offset < y.offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    ASSERT_LE(sorted[i - 1].offset + sorted[i - 1].size, sorted[i].offset);
  }
  if (!sorted.empty()) {
    EXPECT_LE(sorted.back().offset + sorted.back().size, 64 * kMiB);
  }
  AllocatorStats s = a.Stats();
  EXPECT_EQ(s.allocated, allocated);
  EXPECT_EQ(s.requested, requested);
  EXPECT_EQ(s.live_allocations, live.size());
  for (auto& [e, req] : live) a.Free(e, req);
  EXPECT_EQ(a.Stats().free_ranges, 1u);
}

}  // namespace
}  // namespace tierkv
