// A piece of memory a value's bytes are written into. A value may go into
// several, in order (scatter/gather); none is owned.
#ifndef TIERKV_COMMON_MEMORY_PIECE_H_
#define TIERKV_COMMON_MEMORY_PIECE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "tierkv/status.h"

namespace tierkv {

struct MemoryPiece {
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

inline uint64_t TotalSize(std::span<const MemoryPiece> pieces) {
  uint64_t n = 0;
  for (const MemoryPiece& p : pieces) n += p.size;
  return n;
}

// Copies `size` bytes of `src` into `pieces` in order (their total at least
// `size`).
void ScatterInto(std::span<const MemoryPiece> pieces, const uint8_t* src, uint64_t size);

// Bytes [offset, offset + length) of the concatenation of `pieces` (which
// holds them), as pieces.
std::vector<MemoryPiece> SliceOf(std::span<const MemoryPiece> pieces, uint64_t offset,
                                 uint64_t length);

// Where a get's value goes when the manager writes it into a client's
// registered memory.
struct IntoDest {
  std::span<const MemoryPiece> pieces;  // filled in order
  uint64_t capacity = 0;                // the pieces' total
  bool exact = false;                   // the value must be exactly `capacity` bytes
  // Whether a value of `size` bytes goes there; else why not:
  // INVALID_ARGUMENT (exact, and not capacity), TOO_LARGE (larger).
  Status Fits(uint64_t size) const;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_MEMORY_PIECE_H_
