// One KV event as the store announced it, before encoding.
#ifndef TIERKV_EVENTS_EVENT_H_
#define TIERKV_EVENTS_EVENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tierkv/types.h"

namespace tierkv::events {

enum class EventType : uint8_t { kStored, kRemoved, kCleared };

// "stored", "removed", "cleared".
std::string_view EventTypeName(EventType type);
// The legacy names: "BlockStored", "BlockRemoved", "AllBlocksCleared".
std::string_view LegacyTypeName(EventType type);
// The wire medium: HBM and DRAM are "cpu", SSD is "disk".
std::string_view WireMedium(Medium medium);

struct Event {
  EventType type = EventType::kStored;
  uint64_t event_id = 0;  // monotonic per process, assigned when announced
  int64_t timestamp_ms = 0;
  Medium medium = Medium::kDram;  // unused for kCleared
  std::string tenant;
  std::string key;       // per-object events only
  std::string group_id;  // per-object events only; empty = none
};

}  // namespace tierkv::events

#endif  // TIERKV_EVENTS_EVENT_H_
