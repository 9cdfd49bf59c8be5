// Shared memory a process hands to another over a Unix socket: a memfd mapped
// here and sealed so that the other side cannot shrink it under this one.
#ifndef TIERKV_COMMON_SHARED_MEMORY_H_
#define TIERKV_COMMON_SHARED_MEMORY_H_

#include <cstdint>

namespace tierkv {

// Creates a memfd named `name` of `bytes`, maps it shared read-write, then
// seals it with `seals` (F_SEAL_* bits): its descriptor goes to another
// process, and one that could shrink the file would make this process's next
// touch of the lost pages fault. Returns the mapping, and the descriptor in
// *fd (close-on-exec; the caller owns both); nullptr on failure (errno
// tells), nothing left open.
void* MapNewMemfd(const char* name, uint64_t bytes, int seals, int* fd);

}  // namespace tierkv

#endif  // TIERKV_COMMON_SHARED_MEMORY_H_
