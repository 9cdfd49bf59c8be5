#include "media/dram_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/prefault.h"

namespace tierkv {

Result<std::unique_ptr<DramPool>> DramPool::Create(uint64_t capacity) {
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
  // Allocates the pool's pages now, so puts never pay for page faults.
  PrefaultWritable(base, capacity);
  return std::unique_ptr<DramPool>(new DramPool(fd, static_cast<uint8_t*>(base), capacity));
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
