// The value checksum: xxh3-64 of a value's bytes. Every copy of a value is
// checked with it: an SSD blob's header carries it (docs/ssd-format.md), and a
// READ answer on the data channel ends with it (docs/cluster.md).
//
// Thread-safety: ValueChecksum is a pure function; a ValueHasher belongs to
// one thread at a time.
#ifndef TIERKV_MEDIA_CHECKSUM_H_
#define TIERKV_MEDIA_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace tierkv {

// xxh3-64 of a value.
uint64_t ValueChecksum(const void* data, size_t size);

// ValueChecksum computed over consecutive pieces (the same result as one call
// over their concatenation).
class ValueHasher {
 public:
  ValueHasher();
  ~ValueHasher();
  ValueHasher(const ValueHasher&) = delete;
  ValueHasher& operator=(const ValueHasher&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_CHECKSUM_H_
