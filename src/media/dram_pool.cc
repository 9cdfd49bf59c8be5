#include "media/dram_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "common/prefault.h"

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
  int fd = memfd_create("tierkv-dram", MFD_CLOEXEC);
  if (fd < 0) return Status(Code::kIoError, std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    const int err = errno;
    close(fd);
    return Status(Code::kIoError, std::string("ftruncate of the DRAM pool: ") + std::strerror(err));
  }
  void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return Status(Code::kIoError, std::string("mmap of the DRAM pool: ") + std::strerror(err));
  }
  // Advice first: the pages are chosen when they are first touched.
  if (huge_pages) (void)madvise(base, capacity, MADV_HUGEPAGE);
  // Allocates the pool's pages now, so puts never pay for page faults.
  PrefaultWritable(base, capacity);
  std::unique_ptr<DramPool> pool(new DramPool(fd, static_cast<uint8_t*>(base), capacity));
  pool->huge_page_bytes_ = PmdMappedBytes(base);
  return pool;
}

DramPool::DramPool(int fd, uint8_t* base, uint64_t capacity)
    : fd_(fd), base_(base), allocator_(capacity) {}

DramPool::~DramPool() {
  munmap(base_, allocator_.capacity());
  close(fd_);
}

std::optional<Extent> DramPool::Allocate(uint64_t size) {
  if (fault_hook_ && fault_hook_(size)) return std::nullopt;
  return allocator_.Allocate(size);
}

}  // namespace tierkv
