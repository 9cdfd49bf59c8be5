// The value checksum: xxh3-64 of a value's bytes. Every copy of a value is
// checked with it: an SSD blob's header carries it (docs/ssd-format.md), and a
// READ answer on the data channel ends with it (docs/cluster.md).
//
// Thread-safety: ValueChecksum is a pure function; a ValueHasher belongs to
// one thread at a time.
#ifndef TIERKV_MEDIA_CHECKSUM_H_
#define TIERKV_MEDIA_CHECKSUM_H_

#include <atomic>
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

// The checksums already computed over one value whose bytes never change (a
// committed DRAM replica): the whole value's, and those of a few byte ranges
// of at least kMinRange bytes, so that answering them again needs no pass over
// the bytes (smaller ranges are cheap to hash and would crowd out the large
// ones: they are neither kept nor found). Sixteen bytes until a range is
// recorded; at most kRanges ranges are kept, the oldest replaced first. 0
// stands for "unknown" (a value whose checksum really is 0 is simply hashed
// each time).
//
// Thread-safety: every method may be called from any thread.
class ValueDigests {
 public:
  static constexpr size_t kRanges = 8;
  static constexpr uint64_t kMinRange = 256 << 10;
  ValueDigests() = default;
  ~ValueDigests();
  ValueDigests(const ValueDigests&) = delete;
  ValueDigests& operator=(const ValueDigests&) = delete;

  // The checksum of bytes [offset, offset + length) of a value of `size`
  // bytes, or 0 when none was recorded.
  uint64_t Find(uint64_t offset, uint64_t length, uint64_t size) const;
  // Records one (a range equal to the whole value is the whole value's).
  void Remember(uint64_t offset, uint64_t length, uint64_t size, uint64_t digest);

 private:
  struct Ranges;
  std::atomic<uint64_t> whole_{0};
  std::atomic<Ranges*> ranges_{nullptr};  // allocated by the first range recorded
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_CHECKSUM_H_
