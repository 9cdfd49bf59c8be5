// Lookups and removal: exist, query, list, remove, remove-all (linearizable
// with concurrent puts) and the operator's evict.
#include <set>

#include "store/store_internal.h"

namespace tierkv {
// ---------------------------------------------------------------------------
// Lookups and removal.

Result<ObjectInfo> Store::QueryLocked(Shard& shard, const std::string& composite) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
  const Entry& e = it->second;
  const int64_t now = clock_->NowNanos();
  const int64_t wall_now = clock_->NowUnixMillis();
  ObjectInfo info;
  info.state = ReplicaState::kReadable;
  info.name_space = e.name_space;
  if (e.ssd) {
    info.size = e.ssd->blob.header.size;
    info.group_id = e.ssd->blob.header.group_id;
    info.media |= MediumBit(Medium::kSsd);
  }
  if (e.hbm) {
    info.size = e.hbm->size;
    info.group_id = e.hbm->group_id;
    info.media |= MediumBit(Medium::kHbm);
  }
  if (e.current) {
    const Blob& blob = *e.current;
    info.size = blob.size;
    info.group_id = blob.group_id;
    info.media |= MediumBit(Medium::kDram);
    info.active_leases = blob.Leased(now) ? blob.leases : 0;
    if (info.active_leases > 0) {
      info.lease_expires_unix_ms = wall_now + (blob.lease_deadline - now) / 1'000'000;
    }
  }
  info.last_access_unix_ms = wall_now - (now - it->second.last_access) / 1'000'000;
  return info;
}

Status Store::Exist(const Caller& caller, const ObjectRef& ref) {
  Status st = rules_.Ref(ref);
  if (st.ok()) {
    const std::string composite = Composite(ref.tenant, ref.key);
    Shard& shard = ShardFor(composite);
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.readable()) st = NotFound("key not found");
  }
  op_stats_.Record(Op::kExistKey, st.code(), caller.rank);
  return st;
}

Result<ObjectInfo> Store::Query(const Caller& caller, const ObjectRef& ref) {
  Status st = rules_.Ref(ref);
  if (!st.ok()) {
    op_stats_.Record(Op::kQuery, st.code(), caller.rank);
    return st;
  }
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  Result<ObjectInfo> r = [&] {
    ShardLock lock(shard.mu);
    return QueryLocked(shard, composite);
  }();
  op_stats_.Record(Op::kQuery, r.code(), caller.rank);
  return r;
}

Status Store::RemoveLocked(Shard& shard, const std::string& composite) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
  Entry& e = it->second;
  --shard.readable;
  // HBM first: the DRAM replica, if any, then announces memory gone.
  if (e.hbm) DropHbmLocked(shard, *it, RemoveCause::kRemoved);
  if (e.current) {
    std::unique_ptr<Blob> old = std::move(e.current);
    shard.EraseFromDramQueue(e);
    AnnounceRemoved(*it, *old, RemoveCause::kRemoved);
    RetireLocked(shard, std::move(old));
  }
  if (e.ssd) DropSsdLocked(shard, *it, RemoveCause::kRemoved);
  EraseIfEmptyLocked(shard, it);
  return Status::Ok();
}

Status Store::Remove(const Caller& caller, const ObjectRef& ref) {
  Status st = rules_.Ref(ref);
  if (st.ok()) {
    const std::string composite = Composite(ref.tenant, ref.key);
    Shard& shard = ShardFor(composite);
    {
      ShardLock lock(shard.mu);
      st = RemoveLocked(shard, composite);
    }
    DrainSsdTrash();  // the removal is on disk when the call returns
  }
  op_stats_.Record(Op::kRemove, st.code(), caller.rank);
  return st;
}

// Linearizable with concurrent puts: every shard is locked (in index order, the
// only order in which more than one shard lock is ever held) from the first
// removal until `cleared` has been announced. A put that commits meanwhile
// waits, so its `stored` comes after `cleared` and the object survives; one
// committed before is removed here and announced before `cleared`. `cleared`
// is announced only when the tenant is empty at that moment.
RemoveAllResult Store::RemoveTenant(std::string_view tenant, bool force) {
  RemoveAllResult out;
  {
    std::vector<std::unique_lock<ShardMutex>> locks;
    locks.reserve(shards_.size());
    for (auto& shard_ptr : shards_) locks.emplace_back(shard_ptr->mu);
    const int64_t now = clock_->NowNanos();
    for (auto& shard_ptr : shards_) {
      Shard& shard = *shard_ptr;
      shard.mu.AssertHeld();  // every shard was locked above
      for (auto it = shard.map.begin(); it != shard.map.end();) {
        auto next = std::next(it);
        if (TenantOf(it->first) == tenant) {
          Entry& e = it->second;
          const bool has_current = e.readable();
          if (e.pending) {
            if (force) {
              DropPendingLocked(shard, it, /*revoked=*/true);  // erases the entry if nothing else
            } else {
              ++out.skipped;
            }
          }
          if (has_current) {
            if (!force && e.current && e.current->Leased(now)) {
              ++out.skipped;
            } else {
              ++out.removed;
              (void)RemoveLocked(shard, it->first);
            }
          }
        }
        it = next;
      }
    }
    if (out.removed > 0 && out.skipped == 0) {
      out.cleared = true;
      feed_.AppendCleared(tenant);
      for (ReplicaObserver* o : observers_) o->OnTenantCleared(tenant);
    }
  }
  DrainSsdTrash();  // SSD frees do I/O: never under a shard lock
  return out;
}

Result<RemoveAllResult> Store::RemoveAll(const Caller& caller, std::string_view tenant,
                                         bool force) {
  Status st = rules_.Tenant(tenant);
  if (!st.ok()) {
    op_stats_.Record(Op::kRemoveAll, st.code(), caller.rank);
    return st;
  }
  RemoveAllResult out = RemoveTenant(tenant, force);
  op_stats_.Record(Op::kRemoveAll, Code::kOk, caller.rank);
  return out;
}

Result<std::vector<std::string>> Store::ListKeys(const Caller& caller, std::string_view tenant,
                                                 std::string_view prefix, size_t limit) {
  Status st = rules_.Tenant(tenant);
  if (!st.ok()) {
    op_stats_.Record(Op::kGetAllKeys, st.code(), caller.rank);
    return st;
  }
  std::vector<std::string> keys;
  for (auto& shard_ptr : shards_) {
    ShardLock lock(shard_ptr->mu);
    for (const auto& kv : shard_ptr->map) {
      if (!kv.second.readable() || TenantOf(kv.first) != tenant) continue;
      std::string_view key = KeyOf(kv.first);
      if (key.substr(0, prefix.size()) == prefix) keys.emplace_back(key);
    }
  }
  std::sort(keys.begin(), keys.end());
  if (limit > 0 && keys.size() > limit) keys.resize(limit);
  op_stats_.Record(Op::kGetAllKeys, Code::kOk, caller.rank);
  return keys;
}

}  // namespace tierkv
