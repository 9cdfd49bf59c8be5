#include "common/memory_piece.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tierkv {

void ScatterInto(std::span<const MemoryPiece> pieces, const uint8_t* src, uint64_t size) {
  for (const MemoryPiece& p : pieces) {
    if (size == 0) return;
    const uint64_t n = std::min(size, p.size);
    std::memcpy(p.data, src, n);
    src += n;
    size -= n;
  }
}

std::vector<MemoryPiece> SliceOf(std::span<const MemoryPiece> pieces, uint64_t offset,
                                 uint64_t length) {
  std::vector<MemoryPiece> out;
  for (const MemoryPiece& p : pieces) {
    if (length == 0) break;
    if (offset >= p.size) {
      offset -= p.size;
      continue;
    }
    const uint64_t n = std::min(length, p.size - offset);
    out.push_back({p.data + offset, n});
    offset = 0;
    length -= n;
  }
  return out;
}

Status IntoDest::Fits(uint64_t size) const {
  if (exact && size != capacity) {
    return InvalidArgument("the value is " + std::to_string(size) + " bytes, not the " +
                           std::to_string(capacity) + " asked (exact size)");
  }
  if (size > capacity) {
    return Status(Code::kTooLarge, "buffer of " + std::to_string(capacity) +
                                       " bytes is smaller than the value (" + std::to_string(size) +
                                       " bytes)");
  }
  return Status::Ok();
}

}  // namespace tierkv
