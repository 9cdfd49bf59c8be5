#include "common/prefault.h"

#include <sys/mman.h>

namespace tierkv {

bool PrefaultWritable(void* addr, size_t len) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(addr, len, MADV_POPULATE_WRITE) == 0) return true;
#endif
#ifdef MADV_POPULATE_READ
  (void)madvise(addr, len, MADV_POPULATE_READ);
#endif
  return false;
}

}  // namespace tierkv
