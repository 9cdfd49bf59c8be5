#include "media/offset_allocator.h"

#include <bit>
#include <cassert>

namespace tierkv {

OffsetAllocator::OffsetAllocator(uint64_t capacity, uint64_t alignment, bool size_classes)
    : capacity_(capacity / alignment * alignment),
      alignment_(alignment),
      size_classes_(size_classes) {
  assert(std::has_single_bit(alignment));
  if (capacity_ > 0) InsertFree(0, capacity_);
}

uint64_t OffsetAllocator::ClassSize(uint64_t size) const {
  uint64_t granule = alignment_;
  if (size_classes_ && size > 32 * 1024) {
    // 1/8 of the power-of-two bucket the size falls in: <= 12.5% waste.
    const uint64_t bucket = std::bit_floor(size);
    granule = std::max(alignment_, bucket / 8);
  }
  return (size + granule - 1) / granule * granule;
}

void OffsetAllocator::InsertFree(uint64_t offset, uint64_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void OffsetAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

std::optional<Extent> OffsetAllocator::Allocate(uint64_t size) {
  if (size == 0 || size > capacity_) return std::nullopt;
  const uint64_t want = ClassSize(size);
  std::lock_guard<std::mutex> lock(mu_);
  auto fit = by_size_.lower_bound({want, 0});
  if (fit == by_size_.end()) return std::nullopt;
  const uint64_t offset = fit->second;
  const uint64_t have = fit->first;
  EraseFree(by_offset_.find(offset));
  if (have > want) InsertFree(offset + want, have - want);
  allocated_ += want;
  requested_ += size;
  ++live_;
  return Extent{offset, want};
}

bool OffsetAllocator::Reserve(const Extent& extent, uint64_t requested) {
  if (extent.size == 0 || extent.offset % alignment_ != 0 || extent.size % alignment_ != 0) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_offset_.upper_bound(extent.offset);
  if (it == by_offset_.begin()) return false;
  --it;  // the free range starting at or before the extent
  const uint64_t start = it->first, len = it->second;
  if (extent.offset + extent.size > start + len) return false;
  EraseFree(it);
  if (extent.offset > start) InsertFree(start, extent.offset - start);
  const uint64_t end = extent.offset + extent.size;
  if (end < start + len) InsertFree(end, start + len - end);
  allocated_ += extent.size;
  requested_ += requested;
  ++live_;
  return true;
}

void OffsetAllocator::Free(const Extent& extent, uint64_t requested) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t offset = extent.offset;
  uint64_t size = extent.size;
  auto next = by_offset_.lower_bound(offset);
  assert(next == by_offset_.end() || next->first >= offset + size);  // no double free
  if (next != by_offset_.end() && next->first == offset + size) {
    size += next->second;
    auto victim = next++;
    EraseFree(victim);
  }
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    assert(prev->first + prev->second <= offset);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, size);
  allocated_ -= extent.size;
  requested_ -= requested;
  --live_;
}

AllocatorStats OffsetAllocator::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  AllocatorStats s;
  s.capacity = capacity_;
  s.allocated = allocated_;
  s.requested = requested_;
  s.free = capacity_ - allocated_;
  s.largest_free = by_size_.empty() ? 0 : by_size_.rbegin()->first;
  s.free_ranges = by_offset_.size();
  s.live_allocations = live_;
  s.fragmentation =
      s.free == 0 ? 0.0 : 1.0 - static_cast<double>(s.largest_free) / static_cast<double>(s.free);
  return s;
}

}  // namespace tierkv
