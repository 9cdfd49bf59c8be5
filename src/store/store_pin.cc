// Pins: a DRAM replica held for a reader that is not a local session's lease
// (a remote grant, a transfer), charged to its owner's byte budget.
//
// A pin is the same guard the SSD writer uses (Blob::pins): eviction, demotion
// and reuse skip a pinned replica, and a removed one stays allocated as a
// zombie until its last pin goes. The owner table (pins_mu_) counts each
// replica once per owner however often it is pinned.
#include "store/store_internal.h"

namespace tierkv {
Result<PinGrant> Store::Pin(uint64_t owner, const ObjectRef& ref, uint64_t generation,
                            uint64_t budget_bytes, bool may_rewarm) {
  Status st = ValidateRef(ref);
  if (!st.ok()) return st;
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  for (int attempt = 0; attempt < kColdAttempts; ++attempt) {
    {
      std::lock_guard lock(shard.mu);
      auto it = shard.map.find(composite);
      if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
      Entry& e = it->second;
      if (generation != 0 && e.generation != generation) {
        return NotFound("the key holds another value now (generation " +
                        std::to_string(e.generation) + ", asked " + std::to_string(generation) +
                        ")");
      }
      if (Blob* blob = e.current.get()) {
        {
          std::lock_guard<std::mutex> plock(pins_mu_);
          OwnerPins& op = pin_owners_[owner];
          uint32_t& refs = op.replicas[blob];
          if (refs == 0) {
            if (budget_bytes != 0 && op.bytes + blob->extent.size > budget_bytes) {
              op.replicas.erase(blob);
              if (op.ids.empty()) pin_owners_.erase(owner);
              return Status(Code::kNoSpace, "the pin budget of this owner is spent (" +
                                                std::to_string(budget_bytes) + " bytes)");
            }
            op.bytes += blob->extent.size;
          }
          ++refs;
          const uint64_t id = NextId(shard);
          op.ids.insert(id);
          shard.pins.emplace(id, std::make_pair(blob, owner));
          ++blob->pins;
          return PinGrant{id, dram_->base() + blob->extent.offset, blob->size, e.generation,
                          &blob->digests};
        }
      }
    }
    // Only on SSD.
    if (!may_rewarm) return Status(Code::kRetry, "held only on SSD: pinning it needs a rewarm");
    if (Status rw = Rewarm(shard, composite); !rw.ok()) return rw;
  }
  return Status(Code::kRetry, "the rewarmed copy was evicted again before it could be pinned");
}

Status Store::Unpin(uint64_t owner, uint64_t pin_id) {
  Shard& shard = ShardOfId(pin_id);
  std::lock_guard lock(shard.mu);
  auto it = shard.pins.find(pin_id);
  if (it == shard.pins.end() || it->second.second != owner) return NotFound("unknown pin id");
  Blob* blob = it->second.first;
  shard.pins.erase(it);
  {
    std::lock_guard<std::mutex> plock(pins_mu_);
    OwnerPins& op = pin_owners_[owner];
    op.ids.erase(pin_id);
    auto r = op.replicas.find(blob);
    if (r != op.replicas.end() && --r->second == 0) {
      op.bytes -= blob->extent.size;
      op.replicas.erase(r);
    }
    if (op.ids.empty()) pin_owners_.erase(owner);
  }
  UnpinLocked(shard, blob);  // frees a removed replica once nothing holds it
  return Status::Ok();
}

size_t Store::ReleasePins(uint64_t owner) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> plock(pins_mu_);
    auto it = pin_owners_.find(owner);
    if (it == pin_owners_.end()) return 0;
    ids.assign(it->second.ids.begin(), it->second.ids.end());
  }
  size_t n = 0;
  for (uint64_t id : ids) n += Unpin(owner, id).ok() ? 1 : 0;
  return n;
}

uint64_t Store::PinnedBytes(uint64_t owner) const {
  std::lock_guard<std::mutex> plock(pins_mu_);
  auto it = pin_owners_.find(owner);
  return it == pin_owners_.end() ? 0 : it->second.bytes;
}

}  // namespace tierkv
