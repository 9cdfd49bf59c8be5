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
  counters_.fetches.fetch_add(keys.size(), std::memory_order_relaxed);
  std::vector<Item> items = ItemsFor(tenant, keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].only_owner = source;
    items[i].only_generation = i < generations.size() ? generations[i] : 0;
  }
  std::vector<Item*> todo = PointersTo(items);
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

}  // namespace tierkv
