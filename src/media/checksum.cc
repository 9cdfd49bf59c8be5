#include "media/checksum.h"

#include <xxhash.h>

#include <array>
#include <memory>
#include <mutex>

namespace tierkv {

uint64_t ValueChecksum(const void* data, size_t size) { return XXH3_64bits(data, size); }

ValueHasher::ValueHasher() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}
ValueHasher::~ValueHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void ValueHasher::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}
uint64_t ValueHasher::Digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

struct ValueDigests::Ranges {
  struct Slot {
    uint64_t offset = 0, length = 0, digest = 0;
  };
  // The slot holding exactly [offset, offset + length), or null (under mu).
  const Slot* Match(uint64_t offset, uint64_t length) const {
    for (const Slot& s : slots) {
      if (s.digest != 0 && s.offset == offset && s.length == length) return &s;
    }
    return nullptr;
  }
  std::mutex mu;
  std::array<Slot, kRanges> slots{};
  size_t next = 0;  // the slot the next new range takes
};

ValueDigests::~ValueDigests() { delete ranges_.load(std::memory_order_acquire); }

uint64_t ValueDigests::Find(uint64_t offset, uint64_t length, uint64_t size) const {
  if (offset == 0 && length == size) return whole_.load(std::memory_order_relaxed);
  Ranges* r = ranges_.load(std::memory_order_acquire);
  if (r == nullptr || length < kMinRange) return 0;
  std::lock_guard lock(r->mu);
  const Ranges::Slot* s = r->Match(offset, length);
  return s != nullptr ? s->digest : 0;
}

void ValueDigests::Remember(uint64_t offset, uint64_t length, uint64_t size, uint64_t digest) {
  if (offset == 0 && length == size) {
    whole_.store(digest, std::memory_order_relaxed);
    return;
  }
  if (length < kMinRange) return;
  Ranges* r = ranges_.load(std::memory_order_acquire);
  if (r == nullptr) {
    auto fresh = std::make_unique<Ranges>();
    if (ranges_.compare_exchange_strong(r, fresh.get(), std::memory_order_acq_rel)) {
      r = fresh.release();
    }  // else another thread's table won; r now points to it
  }
  std::lock_guard lock(r->mu);
  if (r->Match(offset, length) != nullptr) return;  // already kept
  r->slots[r->next] = {offset, length, digest};
  r->next = (r->next + 1) % kRanges;
}

}  // namespace tierkv
