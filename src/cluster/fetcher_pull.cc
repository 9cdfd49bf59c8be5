// RemoteFetcher::Pull, a drain's copy of the source's own values, and its
// comparison with a value already held here (docs/cluster.md, "Drain jobs").
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "cluster/fetcher.h"
#include "cluster/fetcher_internal.h"

namespace tierkv {

using fetcher_internal::Trace;

std::vector<RemoteFetcher::PullOutcome> RemoteFetcher::Pull(std::string_view tenant,
                                                            std::span<const std::string_view> keys,
                                                            std::string_view source,
                                                            std::span<const uint64_t> generations) {
  TraceScope trace(Trace().fetch);
  fetches_.fetch_add(keys.size(), std::memory_order_relaxed);
  std::vector<Item> items(keys.size());
  std::vector<Item*> todo;
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].tenant = tenant;
    items[i].key = keys[i];
    items[i].only_owner = source;
    items[i].only_generation = i < generations.size() ? generations[i] : 0;
    todo.push_back(&items[i]);
  }
  // Neither leads nor follows a concurrent fetch of the same key: that one
  // may read another owner's value, and this one must read the source's.
  RunPlans(todo);
  std::vector<PullOutcome> out;
  out.reserve(items.size());
  bool all = true;
  for (Item& item : items) {
    all = all && item.status.ok();
    // `stale` is set only when the owner (here the source) refused the item
    // as NOT_FOUND: gone, or another generation.
    out.push_back({std::move(item.status), item.not_indexed, item.stale});
  }
  trace.End(all);
  return out;
}

Status RemoteFetcher::CompareHeld(Peer& peer, Item& item, uint64_t ticket, uint32_t index,
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
  const Status st = ReadRanges(peer, ticket, index, ans, bytes.get(), ranges, &verified);
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    miss_read_.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("READ from " + peer.node + " failed: " + st.message());
    return st;
  }
  item.status =
      std::memcmp(pin->data, bytes.get(), ans.size) == 0 ? Status::Ok() : NotFound(differs);
  return Status::Ok();
}

}  // namespace tierkv
