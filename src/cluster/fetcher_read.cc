// RemoteFetcher's READ stage: a granted segment's items read over the data
// channel straight into local allocations (a large value as several ranges
// at once), verified against the owner's checksums, and committed; a drain's
// comparison of a value held here is in fetcher_pull.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "cluster/fetcher.h"
#include "cluster/fetcher_internal.h"

namespace tierkv {

using fetcher_internal::kMinRange;
using fetcher_internal::RangesFor;
using fetcher_internal::Trace;

bool RemoteFetcher::ReadSegment(Peer& peer, Segment& seg, const Authorized& auth) {
  std::vector<uint32_t> granted;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < seg.items.size(); ++i) {
    const GrantAnswer& ans = auth.answers[i];
    Item& it = *seg.items[i];
    if (i == 0 && auth.first_done) continue;  // read behind the authorization
    if (it.GrantedAsIndexed(ans)) {
      it.loc.generation = ans.generation;  // the same, or the one any_generation got
      it.loc.size = ans.size;
      granted.push_back(i);
      bytes += ans.size;
      continue;
    }
    const bool budget = ans.status.code() == Code::kNoSpace;
    (budget ? miss_budget_ : miss_refused_).fetch_add(1, std::memory_order_relaxed);
    it.stale = ans.status.code() == Code::kNotFound;
    it.status = NotFound("owner " + peer.node + " refused " + std::string(it.key) + ": " +
                         (ans.status.ok() ? "size changed" : ans.status.message()));
  }
  std::atomic<bool> reachable{true};
  std::atomic<size_t> next{0};
  const size_t width = bytes < (1u << 20) ? 1 : std::min(options_.parallel_reads, granted.size());
  // The data connections the items' READs leave free carry ranges of one item.
  const size_t ranges = std::max<size_t>(1, options_.parallel_reads / std::max<size_t>(1, width));
  auto work = [&] {
    for (size_t n = next.fetch_add(1); n < granted.size() && reachable.load();
         n = next.fetch_add(1)) {
      const uint32_t idx = granted[n];
      seg.items[idx]->attempted = true;
      Status st = ReadOne(peer, *seg.items[idx], auth.ticket, idx, auth.answers[idx], ranges);
      if (st.code() == Code::kUnavailable) reachable.store(false);
    }
  };
  std::vector<std::thread> extra;
  for (size_t w = 1; w < width; ++w) extra.emplace_back(work);
  work();
  for (std::thread& t : extra) t.join();
  if (!reachable.load()) {
    for (uint32_t idx : granted) {
      Item& it = *seg.items[idx];
      if (!it.attempted) {
        it.status = NotFound("owner " + peer.node + " is unreachable");
        miss_read_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  return reachable.load();
}

Status RemoteFetcher::ReadRanges(Peer& peer, uint64_t ticket, uint32_t index,
                                 const GrantAnswer& ans, uint8_t* dest, size_t ranges,
                                 std::vector<KnownChecksum>* verified) {
  ranges = RangesFor(ans.size, ranges);
  verified->assign(ranges, KnownChecksum{});
  if (ranges == 1) {
    (*verified)[0].length = ans.size;
    return transport_->Read(peer.data_endpoint, {ticket, index, ans.generation, 0, ans.size}, dest,
                            &(*verified)[0].digest);
  }
  // Whole pages per range (the last takes the rest).
  const uint64_t step = (ans.size / ranges + 4095) & ~uint64_t{4095};
  std::vector<Status> got(ranges);
  auto read = [&](size_t r) {
    const uint64_t off = r * step;
    const uint64_t len = r + 1 == ranges ? ans.size - off : step;
    (*verified)[r].offset = off;
    (*verified)[r].length = len;
    got[r] = transport_->Read(peer.data_endpoint, {ticket, index, ans.generation, off, len},
                              dest + off, &(*verified)[r].digest);
  };
  std::vector<std::thread> others;
  for (size_t r = 1; r < ranges; ++r) others.emplace_back(read, r);
  read(0);
  for (std::thread& t : others) t.join();
  // An unreachable owner first (it ends the plan), else the first failure.
  for (const Status& st : got) {
    if (st.code() == Code::kUnavailable) return st;
  }
  for (Status& st : got) {
    if (!st.ok()) return std::move(st);
  }
  return Status::Ok();
}

Status RemoteFetcher::ReadOne(Peer& peer, Item& item, uint64_t ticket, uint32_t index,
                              const GrantAnswer& ans, size_t ranges) {
  const std::string name_space = item.loc.name_space;
  const Caller caller(kFetchSession, 0, name_space);
  Result<AllocGrant> g =
      store_->Alloc(caller, {item.tenant, item.key}, ans.size, AllocOptions(item));
  if (!g.ok() && g.status().code() == Code::kDuplicated && !item.only_owner.empty()) {
    bool not_held = false;
    const Status st = CompareHeld(peer, item, ticket, index, ans, ranges, &not_held);
    if (!not_held) return st;
    // Removed here between the two: the source's value is stored after all.
    g = store_->Alloc(caller, {item.tenant, item.key}, ans.size, {});
  }
  if (!g.ok()) {
    if (g.status().code() == Code::kDuplicated) {
      if (!item.only_owner.empty()) {
        item.status = NotFound("held here, and replaced here while it was pulled");
        return Status::Ok();
      }
      item.status = Status::Ok();  // stored here meanwhile
      return Status::Ok();
    }
    miss_local_space_.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("no room for it here: " + g.status().message());
    return Status::Ok();
  }
  peer.inflight_bytes.fetch_add(ans.size);
  TraceScope read_trace(Trace().read);
  std::vector<KnownChecksum> verified;  // kept with the value: a READ from here sends them
  const Status st = ReadRanges(peer, ticket, index, ans, g->data, ranges, &verified);
  read_trace.End(st.ok());
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    (void)store_->Abort(caller, g->alloc_id);
    miss_read_.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("READ from " + peer.node + " failed: " + st.message());
    return st;
  }
  CommitFetched(item, caller, g->alloc_id, verified);
  return Status::Ok();
}

void RemoteFetcher::CommitFetched(Item& item, const Caller& caller, uint64_t alloc_id,
                                  std::span<const KnownChecksum> verified) {
  TraceScope store_trace(Trace().store);
  uint64_t generation = 0;
  const Status c = store_->Commit(caller, alloc_id, verified, &generation);
  store_trace.End(c.ok());
  if (!c.ok()) {
    item.status = NotFound("fetched, but not stored here: " + c.message());
    return;
  }
  if (copies_ != nullptr && item.only_owner.empty() &&
      !copies_->Track(
          item.tenant, item.key, generation,
          {item.loc.owner, item.loc.owner_uuid, item.loc.generation, item.owner_sequence},
          item.keep_superseded)) {
    if (item.keep_superseded) {  // the caller reads it once, then removes it
      item.superseded = generation;
      objects_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(item.loc.size, std::memory_order_relaxed);
      item.status = Status::Ok();
      return;
    }
    // Replaced or removed on its owner while it was read: routed again.
    item.stale = true;
    item.status = NotFound(item.loc.owner + " replaced or removed " + std::string(item.key) +
                           " while it was read");
    return;
  }
  objects_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(item.loc.size, std::memory_order_relaxed);
  item.status = Status::Ok();
}

PutOptions RemoteFetcher::AllocOptions(const Item& item) {
  PutOptions o;
  o.dram_only = item.only_owner.empty();  // a drain's value is this manager's own
  return o;
}

}  // namespace tierkv
