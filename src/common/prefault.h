// Pre-faulting shared mappings.
#ifndef TIERKV_COMMON_PREFAULT_H_
#define TIERKV_COMMON_PREFAULT_H_

#include <cstddef>

namespace tierkv {

// Installs writable page-table entries for [addr, addr + len) of a MAP_SHARED
// mapping without changing its contents (MADV_POPULATE_WRITE). MAP_POPULATE maps
// shared pages read-only, so every first write would still take a fault: about a
// third of the time of a 1 MiB copy. Returns false when the kernel refuses
// (before Linux 5.14); the mapping then works, only slower on first touch.
bool PrefaultWritable(void* addr, size_t len);

}  // namespace tierkv

#endif  // TIERKV_COMMON_PREFAULT_H_
