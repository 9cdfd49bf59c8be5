// What only the store's own files share: the eviction victim and the cold-read
// retry bound (the shard itself is store/shard.h). Only store*.cc include this.
#ifndef TIERKV_STORE_STORE_INTERNAL_H_
#define TIERKV_STORE_STORE_INTERNAL_H_

#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/composite_key.h"
#include "media/checksum.h"
#include "media/offset_allocator.h"
#include "store/store.h"

namespace tierkv {

using storage::LeaseRecord;
using storage::ShardLock;
using storage::ShardMutex;

struct Store::Victim {
  int64_t last_access;
  uint32_t shard;
  std::string composite;
  uint64_t dram_bytes = 0;  // its DRAM extent when chosen (what evicting it frees)
};

// How often a read of an SSD-only object rewarms it before giving up with RETRY
// (each time the fresh DRAM copy was evicted again before it could be held).
inline constexpr int kColdAttempts = 4;

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_INTERNAL_H_
