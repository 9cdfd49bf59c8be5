// Pins: a DRAM replica held for a reader that is not a local session's lease
// (a remote grant, a transfer), charged to its owner's byte budget.
//
// A pin is the same guard the SSD writer uses (Blob::pins): eviction, demotion
// and reuse skip a pinned replica, and a removed one stays allocated as a
// zombie until its last pin goes. PinBudgets counts each replica once per
// owner however often it is pinned.
#include "store/store_admin.h"
#include "store/store_internal.h"

namespace tierkv {
Result<PinGrant> StorePins::Pin(uint64_t owner, const ObjectRef& ref, uint64_t generation,
                                uint64_t budget_bytes, bool may_rewarm) {
  Store& s = *store_;
  Status st = s.rules_.Ref(ref);
  if (!st.ok()) return st;
  const std::string composite = Composite(ref.tenant, ref.key);
  Store::Shard& shard = s.ShardFor(composite);
  for (int attempt = 0; attempt < kColdAttempts; ++attempt) {
    bool in_hbm = false;
    {
      ShardLock lock(shard.mu);
      auto it = shard.map.find(composite);
      if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
      Store::Entry& e = it->second;
      if (generation != 0 && e.generation != generation) {
        return NotFound("the key holds another value now (generation " +
                        std::to_string(e.generation) + ", asked " + std::to_string(generation) +
                        ")");
      }
      if (Store::Blob* blob = e.current.get()) {
        Result<uint64_t> id =
            s.pin_budgets_.Add(owner, blob, blob->extent.size, budget_bytes,
                               [&]() TIERKV_REQUIRES(shard.mu) { return shard.NextId(); });
        if (!id.ok()) return id.status();
        shard.pins.emplace(*id, std::make_pair(blob, owner));
        ++blob->pins;
        return PinGrant{*id, s.dram_->base() + blob->extent.offset, blob->size, e.generation,
                        &blob->digests};
      }
      in_hbm = e.hbm != nullptr;
    }
    // Only in HBM (a copy down, no disk to wait for) or only on SSD.
    if (!may_rewarm && !in_hbm) {
      return Status(Code::kRetry, "held only on SSD: pinning it needs a rewarm");
    }
    if (Status rw = s.Rewarm(shard, composite); !rw.ok()) return rw;
  }
  return Status(Code::kRetry, "the rewarmed copy was evicted again before it could be pinned");
}

Status StorePins::Unpin(uint64_t owner, uint64_t pin_id) {
  Store& s = *store_;
  Store::Shard& shard = s.ShardOfId(pin_id);
  ShardLock lock(shard.mu);
  auto it = shard.pins.find(pin_id);
  if (it == shard.pins.end() || it->second.second != owner) return NotFound("unknown pin id");
  Store::Blob* blob = it->second.first;
  shard.pins.erase(it);
  s.pin_budgets_.Remove(owner, blob, blob->extent.size, pin_id);
  s.UnpinLocked(shard, blob);  // frees a removed replica once nothing holds it
  return Status::Ok();
}

size_t StorePins::ReleaseAll(uint64_t owner) {
  size_t n = 0;
  for (uint64_t id : store_->pin_budgets_.Ids(owner)) n += Unpin(owner, id).ok() ? 1 : 0;
  return n;
}

uint64_t StorePins::Bytes(uint64_t owner) const { return store_->pin_budgets_.Bytes(owner); }

}  // namespace tierkv
