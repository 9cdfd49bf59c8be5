// SegmentReader: the READ stage of remote reads, and a Pull's comparison with
// a value held here.
#include "cluster/segment_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "cluster/fetcher_internal.h"

namespace tierkv {

using fetcher_internal::RangesFor;
using fetcher_internal::Trace;

bool SegmentReader::ReadSegment(FetchPeer& peer, FetchSegment& seg, const FetchGrant& auth) {
  std::vector<uint32_t> granted;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < seg.items.size(); ++i) {
    const GrantAnswer& ans = auth.answers[i];
    FetchItem& it = *seg.items[i];
    if (i == 0 && auth.first_done) continue;  // read behind the authorization
    if (it.GrantedAsIndexed(ans)) {
      it.loc.generation = ans.generation;  // the same, or the one any_generation got
      it.loc.size = ans.size;
      granted.push_back(i);
      bytes += ans.size;
      continue;
    }
    const bool budget = ans.status.code() == Code::kNoSpace;
    (budget ? counters_->miss_budget : counters_->miss_refused)
        .fetch_add(1, std::memory_order_relaxed);
    it.stale = ans.status.code() == Code::kNotFound;
    it.status = NotFound("owner " + peer.node + " refused " + std::string(it.key) + ": " +
                         (ans.status.ok() ? "size changed" : ans.status.message()));
  }
  std::atomic<bool> reachable{true};
  std::atomic<size_t> next{0};
  const size_t width = bytes < (1u << 20) ? 1 : std::min(parallel_reads_, granted.size());
  // The data connections the items' READs leave free carry ranges of one item.
  const size_t ranges = std::max<size_t>(1, parallel_reads_ / std::max<size_t>(1, width));
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
      FetchItem& it = *seg.items[idx];
      if (!it.attempted) {
        it.status = NotFound("owner " + peer.node + " is unreachable");
        counters_->miss_read.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  return reachable.load();
}

Status SegmentReader::ReadRanges(FetchPeer& peer, uint64_t ticket, uint32_t index,
                                 const GrantAnswer& ans, std::span<const MemoryPiece> dest,
                                 size_t ranges, std::vector<KnownChecksum>* verified) {
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
                              SliceOf(dest, off, len), &(*verified)[r].digest);
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

void SegmentReader::ReadFailed(FetchPeer& peer, FetchItem& item, const Status& st) {
  if (st.code() == Code::kIoError) {
    counters_->checksum_failures.fetch_add(1, std::memory_order_relaxed);
  }
  counters_->miss_read.fetch_add(1, std::memory_order_relaxed);
  item.status = NotFound("READ from " + peer.node + " failed: " + st.message());
}

void SegmentReader::FinishInto(FetchItem& item, uint64_t size) {
  item.read_size = size;
  counters_->into_objects.fetch_add(1, std::memory_order_relaxed);
  counters_->into_bytes.fetch_add(size, std::memory_order_relaxed);
  item.status = Status::Ok();
}

Status SegmentReader::ReadInto(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                               const GrantAnswer& ans, size_t ranges) {
  if (Status fits = item.into->Fits(ans.size); !fits.ok()) {
    item.status = std::move(fits);
    return Status::Ok();
  }
  const std::vector<MemoryPiece> dest = SliceOf(item.into->pieces, 0, ans.size);
  peer.inflight_bytes.fetch_add(ans.size);
  TraceScope read_trace(Trace().read);
  std::vector<KnownChecksum> verified;
  const Status st = ReadRanges(peer, ticket, index, ans, dest, ranges, &verified);
  read_trace.End(st.ok());
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    ReadFailed(peer, item, st);
    return st;
  }
  FinishInto(item, ans.size);
  return Status::Ok();
}

Status SegmentReader::ReadOne(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                              const GrantAnswer& ans, size_t ranges) {
  if (item.into != nullptr) return ReadInto(peer, item, ticket, index, ans, ranges);
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
    counters_->miss_local_space.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("no room for it here: " + g.status().message());
    return Status::Ok();
  }
  peer.inflight_bytes.fetch_add(ans.size);
  TraceScope read_trace(Trace().read);
  std::vector<KnownChecksum> verified;  // kept with the value: a READ from here sends them
  const MemoryPiece into[] = {{g->data, ans.size}};
  const Status st = ReadRanges(peer, ticket, index, ans, into, ranges, &verified);
  read_trace.End(st.ok());
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    (void)store_->Abort(caller, g->alloc_id);
    ReadFailed(peer, item, st);
    return st;
  }
  CommitFetched(item, caller, g->alloc_id, verified);
  return Status::Ok();
}

void SegmentReader::CommitFetched(FetchItem& item, const Caller& caller, uint64_t alloc_id,
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
      counters_->objects.fetch_add(1, std::memory_order_relaxed);
      counters_->bytes.fetch_add(item.loc.size, std::memory_order_relaxed);
      item.status = Status::Ok();
      return;
    }
    // Replaced or removed on its owner while it was read: routed again.
    item.stale = true;
    item.status = NotFound(item.loc.owner + " replaced or removed " + std::string(item.key) +
                           " while it was read");
    return;
  }
  counters_->objects.fetch_add(1, std::memory_order_relaxed);
  counters_->bytes.fetch_add(item.loc.size, std::memory_order_relaxed);
  item.status = Status::Ok();
}

PutOptions SegmentReader::AllocOptions(const FetchItem& item) {
  PutOptions o;
  o.dram_only = item.only_owner.empty();  // a drain's value is this manager's own
  return o;
}

Status SegmentReader::CompareHeld(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                                  const GrantAnswer& ans, size_t ranges, bool* not_held) {
  // The value held here stays pinned while the source's is read, so the two
  // compared are the ones named; another size differs without a READ (and
  // bounds what a READ may take to a value this manager holds).
  Result<PinGrant> pin = store_->pins().Pin(kCompareSession, {item.tenant, item.key}, 0, 0);
  if (pin.status().code() == Code::kNotFound) {
    *not_held = true;
    return Status::Ok();
  }
  if (!pin.ok()) {
    item.status = NotFound("held here, and not readable to compare: " + pin.status().ToString());
    return Status::Ok();
  }
  struct Unpin {
    Store* store;
    uint64_t id;
    ~Unpin() { (void)store->pins().Unpin(kCompareSession, id); }
  } unpin{store_, pin->pin_id};
  const std::string differs =
      "this manager holds another value of the key than " + peer.node + "; neither is replaced";
  if (pin->size != ans.size) {
    item.status = NotFound(differs);
    return Status::Ok();
  }
  std::unique_ptr<uint8_t[]> bytes(new (std::nothrow) uint8_t[ans.size]);
  if (!bytes) {
    item.status = NotFound("held here, and no memory to compare it with " + peer.node + "'s");
    return Status::Ok();
  }
  peer.inflight_bytes.fetch_add(ans.size);
  std::vector<KnownChecksum> verified;
  const MemoryPiece into[] = {{bytes.get(), ans.size}};
  const Status st = ReadRanges(peer, ticket, index, ans, into, ranges, &verified);
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    ReadFailed(peer, item, st);
    return st;
  }
  item.status =
      std::memcmp(pin->data, bytes.get(), ans.size) == 0 ? Status::Ok() : NotFound(differs);
  return Status::Ok();
}

}  // namespace tierkv
