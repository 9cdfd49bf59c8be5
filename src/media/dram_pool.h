// DramPool: the manager's host-memory tier, one shared-memory region.
//
// The region is a memfd (memfd_create) mapped MAP_SHARED and pre-faulted, so a
// same-host client that receives the descriptor maps the very same pages and
// copies object bytes straight in or out. Byte ranges are handed out by an
// OffsetAllocator. An optional fault hook lets tests make allocations fail.
//
// Huge pages: on request the region is advised MADV_HUGEPAGE before it is
// faulted in. Whether the kernel then backs it with 2 MiB pages is its shmem
// policy (/sys/kernel/mm/transparent_hugepage/shmem_enabled: advise, always,
// within_size or force grant them, never and deny do not); huge_page_bytes()
// says what it did. Fewer, larger pages make copies and O_DIRECT transfers in
// and out of the pool cheaper (fewer TLB misses, fewer pages to pin).
//
// Generations: a second memfd holds one u32 per 4 KiB page of the pool. Free()
// adds one to the generation of the freed range's first page before the range
// can be handed out again. Ranges start on page boundaries, so no two live
// ranges share a first page: a reader that noted a range's generation while
// its object was live, copied the bytes, and then finds the same generation
// knows no part of the range was freed (let alone rewritten) meanwhile. Same-host
// clients map the table read-only for reads without a lease.
//
// Thread-safety: all methods are thread-safe. The mapping lives as long as the
// pool; the memory of a range belongs to whoever holds its Extent.
#ifndef TIERKV_MEDIA_DRAM_POOL_H_
#define TIERKV_MEDIA_DRAM_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "media/offset_allocator.h"
#include "tierkv/status.h"

namespace tierkv {

class DramPool {
 public:
  // Creates and maps a pool of `capacity` bytes (rounded down to 4 KiB),
  // asking for huge pages when `huge_pages` (a kernel that refuses is not an
  // error). Errors: INVALID_ARGUMENT for a zero size, IO_ERROR when
  // memfd_create, ftruncate or mmap fail (the message carries errno's text).
  static Result<std::unique_ptr<DramPool>> Create(uint64_t capacity, bool huge_pages = false);

  ~DramPool();
  DramPool(const DramPool&) = delete;
  DramPool& operator=(const DramPool&) = delete;

  // Bytes of pool per generation (the allocator's alignment).
  static constexpr uint64_t kGenerationPageBytes = 4096;

  // See OffsetAllocator::Allocate. Returns nullopt also when the fault hook says so.
  std::optional<Extent> Allocate(uint64_t size);
  // Returns the range to the allocator, first advancing the generation of its
  // first page (see above).
  void Free(const Extent& extent, uint64_t requested);

  // The generation of the page that holds pool offset `offset` (< capacity).
  uint32_t Generation(uint64_t offset) const;

  uint8_t* base() const { return base_; }
  int fd() const { return fd_; }
  // The generation table's memfd: capacity() / kGenerationPageBytes u32s.
  int generations_fd() const { return gen_fd_; }
  uint64_t generations_bytes() const { return capacity() / kGenerationPageBytes * 4; }
  uint64_t capacity() const { return allocator_.capacity(); }
  AllocatorStats Stats() const { return allocator_.Stats(); }
  uint64_t allocated_bytes() const { return allocator_.allocated_bytes(); }
  const OffsetAllocator& allocator() const { return allocator_; }
  // Bytes of this process's mapping of the pool backed by huge pages, as the
  // kernel reported them once the pool was faulted in (0 when it keeps to
  // 4 KiB pages or cannot say).
  uint64_t huge_page_bytes() const { return huge_page_bytes_; }

  // Test seam: when set, an allocation for which the hook returns true fails.
  // Set before concurrent use.
  void SetAllocationFaultHook(std::function<bool(uint64_t size)> hook) {
    fault_hook_ = std::move(hook);
  }

 private:
  DramPool(int fd, uint8_t* base, uint64_t capacity, int gen_fd, uint32_t* generations);

  int fd_;
  uint8_t* base_;
  int gen_fd_;
  uint32_t* generations_;
  OffsetAllocator allocator_;
  std::function<bool(uint64_t)> fault_hook_;
  uint64_t huge_page_bytes_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_DRAM_POOL_H_
