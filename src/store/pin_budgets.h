// PinBudgets: the pins each owner holds and the bytes they charge to its
// budget. A replica is charged once per owner however often that owner pins
// it; its bytes are given back with the owner's last pin of it.
//
// Thread-safety: thread-safe; its own mutex, taken under a shard lock and
// never around one.
#ifndef TIERKV_STORE_PIN_BUDGETS_H_
#define TIERKV_STORE_PIN_BUDGETS_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tierkv/status.h"

namespace tierkv {

class PinBudgets {
 public:
  // A pin of `replica` (`bytes` allocated) by `owner`, its id from
  // `make_id` (called once, under this table's lock). NO_SPACE, nothing
  // recorded, when the owner's first pin of the replica would pass `budget`
  // (0: unlimited).
  Result<uint64_t> Add(uint64_t owner, const void* replica, uint64_t bytes, uint64_t budget,
                       const std::function<uint64_t()>& make_id);
  // Ends pin `id` of `replica` by `owner`.
  void Remove(uint64_t owner, const void* replica, uint64_t bytes, uint64_t id);
  // The ids `owner` holds now.
  std::vector<uint64_t> Ids(uint64_t owner) const;
  // The bytes charged to `owner` now.
  uint64_t Bytes(uint64_t owner) const;

 private:
  struct Owner {
    uint64_t bytes = 0;
    std::unordered_map<const void*, uint32_t> replicas;  // pins per replica
    std::unordered_set<uint64_t> ids;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Owner> owners_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_PIN_BUDGETS_H_
