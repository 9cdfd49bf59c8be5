#include "common/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace tierkv {

void* MapNewMemfd(const char* name, uint64_t bytes, int seals, int* fd) {
  *fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (*fd < 0) return nullptr;
  if (ftruncate(*fd, static_cast<off_t>(bytes)) == 0) {
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (base != MAP_FAILED && fcntl(*fd, F_ADD_SEALS, seals) == 0) return base;
    if (base != MAP_FAILED) munmap(base, bytes);
  }
  const int err = errno;
  close(*fd);
  *fd = -1;
  errno = err;
  return nullptr;
}

}  // namespace tierkv
