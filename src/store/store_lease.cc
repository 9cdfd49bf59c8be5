// Read leases: grant, release, and expiry (reaping) of leases and grants.
#include "store/store_internal.h"

namespace tierkv {
namespace {

int64_t MsToNs(int64_t ms) { return ms * 1'000'000; }

}  // namespace

// Detaches expired leases from their blobs (freeing zombies whose last lease
// ended) and forgets tombstones older than lease_tombstone_ms.
size_t Store::ReapShardLocked(Shard& shard, int64_t now) {
  size_t expired = 0;
  const int64_t tombstone_ns = MsToNs(options_.lease_tombstone_ms);
  for (auto it = shard.leases.begin(); it != shard.leases.end();) {
    LeaseRecord& rec = it->second;
    if (rec.hbm != nullptr && now > rec.deadline) {
      rec.hbm.reset();  // the range goes back to its pool if nothing else holds it
      ++expired;
    }
    if (rec.blob != nullptr && now > rec.deadline) {
      Blob* blob = static_cast<Blob*>(rec.blob);
      rec.blob = nullptr;
      --blob->leases;
      ++expired;
      FreeZombieLocked(shard, blob);
    }
    if (!rec.live() && now > rec.deadline + tombstone_ns) {
      shard.DropLease(it++);
    } else {
      ++it;
    }
  }
  expired_leases_.fetch_add(expired, std::memory_order_relaxed);
  return expired;
}

// ---------------------------------------------------------------------------
// Reads.

Result<LeaseGrant> Store::LeaseLocked(Shard& shard, const std::string& composite,
                                      const Caller& caller, int64_t now, bool* cold, Medium from,
                                      ReadHold hold) {
  auto it = shard.map.find(composite);
  if (hold == ReadHold::kLeaseDevice && it != shard.map.end() && it->second.hbm) {
    return LeaseHbmLocked(shard, *it, caller, now);
  }
  if (it == shard.map.end() || !it->second.current) {
    if (cold != nullptr) *cold = it != shard.map.end() && it->second.readable();
    return NotFound("key not found");
  }
  Blob& blob = *it->second.current;
  std::atomic<uint64_t>& hits = from == Medium::kSsd && ssd_ ? ssd_->counters.get_hits_ssd
                                : from == Medium::kHbm       ? hbm_counters_.get_hits
                                                             : get_hits_dram_;
  hits.fetch_add(1, std::memory_order_relaxed);
  shard.Touch(*it, now);
  uint8_t* const data = dram_->base() + blob.extent.offset;
  if (hold == ReadHold::kLocate) {
    // The only read of the generation table on a get: a leased get needs none.
    return LeaseGrant{
        0, blob.extent.offset, blob.size, 0, data, dram_->Generation(blob.extent.offset)};
  }
  const int64_t deadline = now + MsToNs(options_.lease_ms);
  const uint64_t id = shard.NextId();
  shard.AddLease(id, LeaseRecord{&blob, deadline, caller.session, nullptr});
  ++blob.leases;
  blob.lease_deadline = std::max(blob.lease_deadline, deadline);
  return LeaseGrant{id, blob.extent.offset, blob.size, deadline, data};
}

Result<LeaseGrant> Store::Lease(const Caller& caller, const ObjectRef& ref, ReadHold hold) {
  Status st = rules_.Ref(ref);
  if (!st.ok()) {
    op_stats_.Record(Op::kGet, st.code(), caller.rank);
    return st;
  }
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  bool cold = false;
  Result<LeaseGrant> r = [&] {
    ShardLock lock(shard.mu);
    return LeaseLocked(shard, composite, caller, clock_->NowNanos(), &cold, Medium::kDram, hold);
  }();
  if (cold) r = LeaseCold(shard, composite, caller);
  op_stats_.Record(Op::kGet, r.code(), caller.rank);
  return r;
}

Status Store::ReleaseLocked(Shard& shard, uint64_t lease_id, uint64_t session, int64_t now) {
  auto it = shard.leases.find(lease_id);
  if (it == shard.leases.end() || it->second.owner != session) {
    return NotFound("unknown lease id");
  }
  LeaseRecord rec = std::move(it->second);
  shard.DropLease(it);
  if (rec.hbm != nullptr) {
    rec.hbm.reset();  // the range goes back to its pool if nothing else holds it
    if (now > rec.deadline) {
      expired_leases_.fetch_add(1, std::memory_order_relaxed);
      return Status(Code::kLeaseExpired, "the read lease expired before release; discard the copy");
    }
    return Status::Ok();
  }
  if (rec.blob == nullptr) {
    return Status(Code::kLeaseExpired, "the read lease expired before release; discard the copy");
  }
  Blob* blob = static_cast<Blob*>(rec.blob);
  --blob->leases;
  const bool expired = now > rec.deadline;
  if (expired) expired_leases_.fetch_add(1, std::memory_order_relaxed);
  FreeZombieLocked(shard, blob);
  if (expired) {
    return Status(Code::kLeaseExpired, "the read lease expired before release; discard the copy");
  }
  return Status::Ok();
}

Status Store::Release(const Caller& caller, uint64_t lease_id) {
  Shard& shard = ShardOfId(lease_id);
  ShardLock lock(shard.mu);
  return ReleaseLocked(shard, lease_id, caller.session, clock_->NowNanos());
}

}  // namespace tierkv
