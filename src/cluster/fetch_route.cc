#include "cluster/fetch_route.h"

#include <string>
#include <tuple>

namespace tierkv {

std::optional<size_t> PickRoute(std::span<const RouteCandidate> candidates) {
  auto score = [](const RouteCandidate& c) {
    return std::make_tuple(c.location->medium == Medium::kDram ? 0 : 1, c.inflight_bytes,
                           c.location->complete ? 0 : 1);
  };
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!best || score(candidates[i]) < score(candidates[*best])) best = i;
  }
  return best;
}

Status NoRoute(const IndexLookup& found) {
  if (!found.locations.empty()) return NotFound("its owners are not reachable members now");
  if (!found.absence_proved) {
    return NotFound("not in the views held; the view of " + found.incomplete_owner +
                    " is incomplete");
  }
  return NotFound("not held by any other manager");
}

std::vector<size_t> CutSegments(std::span<const SegmentItem> items, const SegmentLimits& limits) {
  std::vector<size_t> starts;
  size_t count = 0;
  uint64_t bytes = 0, key_bytes = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const SegmentItem& it = items[i];
    if (starts.empty() || count >= limits.items || bytes + it.value_bytes > limits.bytes ||
        key_bytes + it.key_bytes > limits.key_bytes) {
      starts.push_back(i);
      count = 0;
      bytes = 0;
      key_bytes = 0;
    }
    ++count;
    bytes += it.value_bytes;
    key_bytes += it.key_bytes;
  }
  return starts;
}

}  // namespace tierkv
