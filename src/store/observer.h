// ReplicaObserver: the one way the rest of the manager learns what the store holds.
//
// Every replica transition is announced exactly once: a replica became readable on
// a medium (OnStored), a replica stopped being readable on a medium (OnRemoved),
// or a tenant was emptied by RemoveAll (OnTenantCleared). Events, metrics and the
// cluster inventory journal all consume these announcements; nothing else looks
// inside the store.
//
// Ordering: calls for one object come in the order the transitions happened (an
// upsert announces OnRemoved for the old value before OnStored for the new one),
// because they are made while the store holds that object's shard lock.
//
// Contract for implementers: return quickly, never block, never call back into
// the store (that would deadlock). The string_views are valid only for the call.
#ifndef TIERKV_STORE_OBSERVER_H_
#define TIERKV_STORE_OBSERVER_H_

#include <cstdint>
#include <string_view>

#include "tierkv/types.h"

namespace tierkv {

enum class RemoveCause : uint8_t {
  kRemoved,   // remove / batch_remove / remove_all / REST delete
  kReplaced,  // upsert replaced the value
  kEvicted,   // dropped by eviction
  kDemoted,   // moved to a lower tier (the lower copy is announced separately)
};

struct ReplicaEvent {
  std::string_view tenant;
  std::string_view key;
  std::string_view group_id;
  Medium medium = Medium::kDram;
  uint64_t size = 0;
  RemoveCause cause = RemoveCause::kRemoved;  // OnRemoved only
  uint64_t generation = 0;  // new each time the key is (re)created by a put or upsert
  uint64_t sequence = 0;    // the store's change sequence of this transition (change_feed.h)
  std::string_view name_space = {};  // of the put that created the value ("" = none)
};

class ReplicaObserver {
 public:
  virtual ~ReplicaObserver() = default;
  virtual void OnStored(const ReplicaEvent& event) = 0;
  virtual void OnRemoved(const ReplicaEvent& event) = 0;
  virtual void OnTenantCleared(std::string_view tenant) = 0;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_OBSERVER_H_
