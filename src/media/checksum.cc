#include "media/checksum.h"

#include <xxhash.h>

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

}  // namespace tierkv
