#include "media/dram_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "common/prefault.h"
#include "common/shared_memory.h"

namespace tierkv {
namespace {

// The ShmemPmdMapped figure of the mapping that starts at `base`, from
// /proc/self/smaps (0 when it cannot be read).
uint64_t PmdMappedBytes(const void* base) {
  std::ifstream smaps("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", reinterpret_cast<unsigned long>(base));
  std::string line;
  bool in_pool = false;
  while (std::getline(smaps, line)) {
    const bool header = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                        line.find(' ') > line.find('-');
    if (header) {
      if (in_pool) return 0;  // the pool's entry had no such line
      in_pool = line.rfind(start, 0) == 0;
      continue;
    }
    unsigned long long kib = 0;
    if (in_pool && std::sscanf(line.c_str(), "ShmemPmdMapped: %llu kB", &kib) == 1) {
      return kib << 10;
    }
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<DramPool>> DramPool::Create(uint64_t capacity, bool huge_pages) {
  capacity = capacity / 4096 * 4096;
  if (capacity == 0) return InvalidArgument("DRAM pool size must be at least 4 KiB");
  int fd = -1;
  void* base = MapNewMemfd("tierkv-dram", capacity, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &fd);
  if (base == nullptr) {
    return Status(Code::kIoError, std::string("the DRAM pool's memfd: ") + std::strerror(errno));
  }
  int gen_fd = -1;
  const uint64_t gen_bytes = capacity / kGenerationPageBytes * sizeof(uint32_t);
  // Clients may map the table, but only read-only: no writable mapping or
  // write through a descriptor can be made after the seal.
  void* gens =
      MapNewMemfd("tierkv-generations", gen_bytes,
                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL, &gen_fd);
  if (gens == nullptr) {
    const int err = errno;
    munmap(base, capacity);
    close(fd);
    return Status(Code::kIoError,
                  std::string("the DRAM pool's generation table: ") + std::strerror(err));
  }
  // Advice first: the pages are chosen when they are first touched.
  if (huge_pages) (void)madvise(base, capacity, MADV_HUGEPAGE);
  // Allocates the pool's pages now, so puts never pay for page faults.
  PrefaultWritable(base, capacity);
  std::unique_ptr<DramPool> pool(new DramPool(fd, static_cast<uint8_t*>(base), capacity, gen_fd,
                                              static_cast<uint32_t*>(gens)));
  pool->huge_page_bytes_ = PmdMappedBytes(base);
  return pool;
}

DramPool::DramPool(int fd, uint8_t* base, uint64_t capacity, int gen_fd, uint32_t* generations)
    : fd_(fd),
      base_(base),
      gen_fd_(gen_fd),
      generations_(generations),
      allocator_(capacity, kGenerationPageBytes) {}

DramPool::~DramPool() {
  munmap(generations_, generations_bytes());
  close(gen_fd_);
  munmap(base_, allocator_.capacity());
  close(fd_);
}

void DramPool::Free(const Extent& extent, uint64_t requested) {
  // Before the allocator can hand out any part of the range again; readers
  // in other processes load the generation after their copy.
  std::atomic_ref<uint32_t>(generations_[extent.offset / kGenerationPageBytes])
      .fetch_add(1, std::memory_order_seq_cst);
  allocator_.Free(extent, requested);
}

uint32_t DramPool::Generation(uint64_t offset) const {
  return std::atomic_ref<uint32_t>(generations_[offset / kGenerationPageBytes])
      .load(std::memory_order_acquire);
}

std::optional<Extent> DramPool::Allocate(uint64_t size) {
  if (fault_hook_ && fault_hook_(size)) return std::nullopt;
  return allocator_.Allocate(size);
}

}  // namespace tierkv
