// OffsetAllocator: hands out byte ranges of a fixed-size region (the DRAM pool).
//
// What it does: best-fit allocation of aligned ranges with immediate coalescing
// of neighbouring free ranges on release.
//
// Algorithm: requests are first rounded up to a size class: a multiple of the
// alignment (4 KiB, suitable for O_DIRECT) for small sizes and, above 32 KiB, a
// multiple of 1/8 of the request's power-of-two bucket, so at most 12.5% is
// wasted inside a block while the variety of block sizes (and with it external
// fragmentation) stays low. Free ranges are indexed twice: by offset (for
// coalescing with neighbours) and by (size, offset) (for best fit, lowest
// offset first among equal sizes, which keeps the region compact).
//
// Cost: O(log F) per allocate and free, F = number of free ranges. One mutex;
// the critical section is a few map operations, well below a microsecond.
//
// Thread-safety: all methods are thread-safe.
#ifndef TIERKV_MEDIA_OFFSET_ALLOCATOR_H_
#define TIERKV_MEDIA_OFFSET_ALLOCATOR_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace tierkv {

struct Extent {
  uint64_t offset = 0;
  uint64_t size = 0;  // the rounded (class) size actually reserved
};

struct AllocatorStats {
  uint64_t capacity = 0;
  uint64_t allocated = 0;     // bytes reserved, class-rounded
  uint64_t requested = 0;     // bytes asked for (before rounding)
  uint64_t free = 0;          // capacity - allocated
  uint64_t largest_free = 0;  // the biggest single free range
  uint64_t free_ranges = 0;
  uint64_t live_allocations = 0;
  // External fragmentation: 1 - largest_free / free (0 when nothing is free).
  double fragmentation = 0;
};

class OffsetAllocator {
 public:
  // `capacity` bytes starting at offset 0; `alignment` must be a power of two.
  // Without `size_classes` requests are only rounded to the alignment (the SSD
  // tier, whose extents must match what recovery finds on disk).
  OffsetAllocator(uint64_t capacity, uint64_t alignment = 4096, bool size_classes = true);

  OffsetAllocator(const OffsetAllocator&) = delete;
  OffsetAllocator& operator=(const OffsetAllocator&) = delete;

  // Reserves at least `size` bytes (size > 0). Returns nullopt when no free range
  // is large enough (the caller may evict and retry).
  std::optional<Extent> Allocate(uint64_t size);

  // Reserves exactly [extent.offset, extent.offset + extent.size) (aligned),
  // as Allocate would have handed it out; for rebuilding state from disk.
  // False when any part of it is not free.
  bool Reserve(const Extent& extent, uint64_t requested);

  // Returns a range obtained from Allocate(). `requested` is the size originally
  // asked for (for accounting). Freeing a range twice is a bug (asserted).
  void Free(const Extent& extent, uint64_t requested);

  AllocatorStats Stats() const;

  // The class size `size` is rounded to.
  uint64_t ClassSize(uint64_t size) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t alignment() const { return alignment_; }
  // Bytes reserved right now (class-rounded); lock-free, may lag by one update.
  uint64_t allocated_bytes() const { return allocated_.load(std::memory_order_relaxed); }

 private:
  void InsertFree(uint64_t offset, uint64_t size);            // mu_ held
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);  // mu_ held

  const uint64_t capacity_;
  const uint64_t alignment_;
  const bool size_classes_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> by_offset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // (size, offset)
  std::atomic<uint64_t> allocated_{0};
  uint64_t requested_ = 0;
  uint64_t live_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_OFFSET_ALLOCATOR_H_
