// Starting the memory loads of a hash-map lookup ahead of the lookup itself,
// so that the cache misses of several lookups overlap instead of following
// one another (batched lookups start them for a window of keys, then look
// the keys up one by one).
#ifndef TIERKV_COMMON_PREFETCH_H_
#define TIERKV_COMMON_PREFETCH_H_

#include <cstddef>

namespace tierkv {

// For a std::unordered_map (or set) `map` and one of its bucket indices
// (map.bucket(key)): loads the bucket (waiting for it) and starts, without
// waiting, the loads of the bucket's first element and of the word right
// after it, where a node of this standard library caches the element's hash
// (what a lookup compares first). Computing the buckets of several keys first
// and then calling this for each keeps the loop that waits short, so more of
// the loads are in flight together. The caller holds whatever lock guards
// `map`. No effect on the map.
template <typename Map>
void PrefetchBucket(const Map& map, size_t bucket) {
  const auto first = map.begin(bucket);
  if (first == map.end(bucket)) return;
  const char* element = reinterpret_cast<const char*>(&*first);
  for (size_t at = 0; at < sizeof(typename Map::value_type); at += 64) {
    __builtin_prefetch(element + at);
  }
  __builtin_prefetch(element + sizeof(typename Map::value_type));
}

}  // namespace tierkv

#endif  // TIERKV_COMMON_PREFETCH_H_
