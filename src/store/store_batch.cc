// Store: batch calls. Items are grouped by shard so each shard's lock is taken
// once per batch; results come back in input order, one status per item.
#include <algorithm>
#include <array>
#include <type_traits>

#include "common/prefetch.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace tierkv {
namespace {

template <typename T>
std::vector<Code> CodesOf(const std::vector<T>& results) {
  std::vector<Code> codes;
  codes.reserve(results.size());
  for (const auto& r : results) codes.push_back(r.code());
  return codes;
}

}  // namespace

// Item indices ordered by shard, so runs of equal shards can share one lock.
namespace {

// The indices 0..n-1 ordered by bucket_of(i) < buckets, stably (items of one
// bucket keep their order): a counting sort, O(n + buckets).
template <typename BucketOf>
std::vector<uint32_t> StableBucketOrder(size_t n, size_t buckets, BucketOf bucket_of) {
  std::vector<uint32_t> bucket(n);
  std::vector<uint32_t> start(buckets + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    bucket[i] = bucket_of(i);
    ++start[bucket[i] + 1];
  }
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[start[bucket[i]]++] = static_cast<uint32_t>(i);
  return order;
}

// Ids carry their shard in the low byte.
std::vector<uint32_t> IdShardOrder(std::span<const uint64_t> ids) {
  return StableBucketOrder(ids.size(), 256, [&](size_t i) { return ids[i] & 0xff; });
}

}  // namespace

std::vector<uint32_t> Store::ShardOrder(std::span<const std::string> composites,
                                        std::vector<uint32_t>* shard_of) const {
  shard_of->resize(composites.size());
  for (size_t i = 0; i < composites.size(); ++i) (*shard_of)[i] = ShardIndex(composites[i]);
  return StableBucketOrder(composites.size(), shards_.size(),
                           [&](size_t i) { return (*shard_of)[i]; });
}

namespace {

// Runs `fn(shard, item_index)` for every valid item, holding each shard's lock
// once for all its items. `valid[i]` false items are skipped.
template <typename ShardOf, typename Fn>
void ForEachByShard(const std::vector<uint32_t>& order, const std::vector<bool>& valid,
                    ShardOf shard_of, Fn fn) {
  size_t i = 0;
  while (i < order.size()) {
    if (!valid[order[i]]) {
      ++i;
      continue;
    }
    auto& shard = shard_of(order[i]);
    ShardLock lock(shard.mu);
    while (i < order.size() && (!valid[order[i]] || &shard_of(order[i]) == &shard)) {
      if (valid[order[i]]) fn(shard, order[i]);
      ++i;
    }
  }
}

// Keys looked up together: this many items' index loads are in flight at once.
constexpr size_t kLookupWindow = 16;

// As ForEachByShard, for keyed lookups, `kLookupWindow` valid items at a time:
// the window's shard locks are taken in ascending shard order (`order` is
// sorted by shard, and every path that holds several shard locks takes them
// in that order) and held for the whole window. Before `fn` runs for any item
// of the window, the bucket of every item's key (`key_of(i)`) is computed,
// then the loads of every bucket and its first entry are started, in two tight
// loops: so the cache misses of the window's lookups overlap instead of
// following one another. The lock analysis cannot follow a window of locks;
// `fn` states that it requires its shard's lock, and gets it.
template <typename ShardOf, typename KeyOf, typename Fn>
TIERKV_NO_THREAD_SAFETY_ANALYSIS void ForEachKeyByShard(const std::vector<uint32_t>& order,
                                                        const std::vector<bool>& valid,
                                                        ShardOf shard_of, KeyOf key_of, Fn fn) {
  using ShardT = std::remove_reference_t<decltype(shard_of(0u))>;
  struct Held {
    std::array<ShardT*, kLookupWindow> shards{};
    size_t n = 0;
    void Release() TIERKV_NO_THREAD_SAFETY_ANALYSIS {
      while (n > 0) shards[--n]->mu.unlock();
    }
    ~Held() { Release(); }
  } held;
  std::array<std::pair<ShardT*, uint32_t>, kLookupWindow> window;
  size_t i = 0;
  while (i < order.size()) {
    size_t w = 0;
    for (; i < order.size() && w < kLookupWindow; ++i) {
      if (valid[order[i]]) window[w++] = {&shard_of(order[i]), order[i]};
    }
    for (size_t k = 0; k < w; ++k) {
      if (held.n == 0 || held.shards[held.n - 1] != window[k].first) {
        window[k].first->mu.lock();
        held.shards[held.n++] = window[k].first;
      }
    }
    std::array<size_t, kLookupWindow> buckets;
    for (size_t k = 0; k < w; ++k)
      buckets[k] = window[k].first->map.bucket(key_of(window[k].second));
    for (size_t k = 0; k < w; ++k) PrefetchBucket(window[k].first->map, buckets[k]);
    for (size_t k = 0; k < w; ++k) fn(*window[k].first, window[k].second);
    held.Release();
  }
}

}  // namespace

template <typename Fn>
void Store::ForEachKey(const std::vector<std::string>& composites, const std::vector<bool>& valid,
                       Fn fn) {
  std::vector<uint32_t> shard_of;  // hashed once per item, for the order and the locks
  const std::vector<uint32_t> order = ShardOrder(composites, &shard_of);
  ForEachKeyByShard(
      order, valid, [&](uint32_t i) -> Shard& { return *shards_[shard_of[i]]; },
      [&](uint32_t i) -> const std::string& { return composites[i]; }, fn);
}

std::vector<Result<AllocGrant>> Store::BatchAlloc(const Caller& caller, std::string_view tenant,
                                                  std::span<const AllocItem> items) {
  std::vector<Result<AllocGrant>> out;
  out.reserve(items.size());
  // Space is reserved item by item (eviction may run between items), but each
  // item's index checks and installation are as in Alloc.
  const Status tenant_status = rules_.Tenant(tenant);
  for (const AllocItem& item : items) {
    if (!tenant_status.ok()) {
      out.emplace_back(tenant_status);
      continue;
    }
    Status st = rules_.Put(item.key, item.size, item.options);
    if (!st.ok()) {
      out.emplace_back(st);
      continue;
    }
    const std::string composite = Composite(tenant, item.key);
    Shard& shard = ShardFor(composite);
    {
      ShardLock lock(shard.mu);
      st = CheckPutLocked(shard, composite, item.options);
    }
    if (!st.ok()) {
      out.emplace_back(st);
      continue;
    }
    out.push_back(ReservePut(shard, composite, caller, item.size, item.options));
  }
  op_stats_.RecordBatch(Op::kBatchAlloc, Op::kAlloc, CodesOf(out), caller.rank);
  return out;
}

std::vector<Status> Store::BatchCommit(const Caller& caller, std::span<const uint64_t> ids) {
  std::vector<Status> out(ids.size());
  const std::vector<uint32_t> order = IdShardOrder(ids);
  std::vector<bool> valid(ids.size(), true);
  ForEachByShard(
      order, valid, [&](uint32_t i) -> Shard& { return ShardOfId(ids[i]); },
      [&](Shard& shard, uint32_t i) {
        shard.mu.AssertHeld();  // ForEach*ByShard holds it
        out[i] = CommitLocked(shard, ids[i], caller.session);
      });
  op_stats_.RecordBatch(Op::kBatchUpdateState, Op::kUpdateState, CodesOf(out), caller.rank);
  return out;
}

std::vector<Status> Store::BatchRelease(const Caller& caller, std::span<const uint64_t> ids) {
  std::vector<Status> out(ids.size());
  const int64_t now = clock_->NowNanos();  // one reading for the whole batch
  const std::vector<uint32_t> order = IdShardOrder(ids);
  std::vector<bool> valid(ids.size(), true);
  ForEachByShard(
      order, valid, [&](uint32_t i) -> Shard& { return ShardOfId(ids[i]); },
      [&](Shard& shard, uint32_t i) {
        shard.mu.AssertHeld();  // ForEach*ByShard holds it
        out[i] = ReleaseLocked(shard, ids[i], caller.session, now);
      });
  return out;
}

// Shared skeleton of the keyed batch calls: validate, group by shard, run `fn`
// under the shard lock, count.
template <typename R, typename Fn>
std::vector<R> KeyedBatch(Store& store, std::string_view tenant,
                          std::span<const std::string_view> keys,
                          std::vector<std::string>& composites, std::vector<bool>& valid, Fn fn) {
  std::vector<R> out(keys.size(), R(Status::Ok()));
  const Status tenant_status = store.rules().Tenant(tenant);
  composites.resize(keys.size());
  valid.assign(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    Status st = tenant_status.ok() ? store.rules().Key(keys[i]) : tenant_status;
    if (!st.ok()) {
      out[i] = R(st);
      continue;
    }
    composites[i] = Composite(tenant, keys[i]);
    valid[i] = true;
  }
  fn(out);
  return out;
}

std::vector<Result<LeaseGrant>> Store::BatchLease(const Caller& caller, std::string_view tenant,
                                                  std::span<const std::string_view> keys,
                                                  ReadHold hold) {
  std::vector<std::string> composites;
  std::vector<bool> valid;
  std::vector<uint32_t> cold_items;
  const int64_t now = clock_->NowNanos();  // one reading for the whole batch
  auto out = KeyedBatch<Result<LeaseGrant>>(
      *this, tenant, keys, composites, valid, [&](std::vector<Result<LeaseGrant>>& res) {
        ForEachKey(composites, valid, [&](Shard& shard, uint32_t i) {
          shard.mu.AssertHeld();  // ForEach*ByShard holds it
          bool cold = false;
          res[i] = LeaseLocked(shard, composites[i], caller, now, &cold, Medium::kDram, hold);
          if (cold) cold_items.push_back(i);
        });
      });
  // Values held only on SSD or in HBM are copied into DRAM after the shard
  // pass, without its locks, up to the SSD queue depth at a time.
  if (!cold_items.empty()) {
    std::vector<std::function<void()>> rewarms;
    rewarms.reserve(cold_items.size());
    for (uint32_t i : cold_items) {
      rewarms.emplace_back(
          [&, i] { out[i] = LeaseCold(ShardFor(composites[i]), composites[i], caller); });
    }
    if (ssd_) {
      ssd_->io().RunAll(rewarms);
    } else {
      for (auto& rewarm : rewarms) rewarm();  // from HBM: no disk to wait for
    }
  }
  op_stats_.RecordBatch(Op::kBatchGet, Op::kGet, CodesOf(out), caller.rank);
  return out;
}

std::vector<Status> Store::BatchExist(const Caller& caller, std::string_view tenant,
                                      std::span<const std::string_view> keys) {
  std::vector<std::string> composites;
  std::vector<bool> valid;
  auto out =
      KeyedBatch<Status>(*this, tenant, keys, composites, valid, [&](std::vector<Status>& res) {
        ForEachKey(composites, valid, [&](Shard& shard, uint32_t i) {
          shard.mu.AssertHeld();  // ForEach*ByShard holds it
          auto it = shard.map.find(composites[i]);
          if (it == shard.map.end() || !it->second.readable()) {
            res[i] = NotFound("key not found");
          }
        });
      });
  op_stats_.RecordBatch(Op::kBatchExistKey, Op::kExistKey, CodesOf(out), caller.rank);
  return out;
}

std::vector<Result<ObjectInfo>> Store::BatchQuery(const Caller& caller, std::string_view tenant,
                                                  std::span<const std::string_view> keys) {
  std::vector<std::string> composites;
  std::vector<bool> valid;
  auto out = KeyedBatch<Result<ObjectInfo>>(
      *this, tenant, keys, composites, valid, [&](std::vector<Result<ObjectInfo>>& res) {
        ForEachKey(composites, valid, [&](Shard& shard, uint32_t i) {
          shard.mu.AssertHeld();  // ForEach*ByShard holds it
          res[i] = QueryLocked(shard, composites[i]);
        });
      });
  op_stats_.RecordBatch(Op::kBatchQuery, Op::kQuery, CodesOf(out), caller.rank);
  return out;
}

std::vector<Status> Store::BatchRemove(const Caller& caller, std::string_view tenant,
                                       std::span<const std::string_view> keys) {
  std::vector<std::string> composites;
  std::vector<bool> valid;
  auto out =
      KeyedBatch<Status>(*this, tenant, keys, composites, valid, [&](std::vector<Status>& res) {
        ForEachKey(composites, valid, [&](Shard& shard, uint32_t i) {
          shard.mu.AssertHeld();  // ForEach*ByShard holds it
          res[i] = RemoveLocked(shard, composites[i]);
        });
      });
  DrainSsdTrash();
  op_stats_.RecordBatch(Op::kBatchRemove, Op::kRemove, CodesOf(out), caller.rank);
  return out;
}

}  // namespace tierkv
