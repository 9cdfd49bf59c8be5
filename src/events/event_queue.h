// EventQueue: the bounded hand-off between the store (producers, under shard
// locks, never blocked) and the publisher thread (the consumer).
//
// Drop policy. Up to `soft_capacity` events are queued as they come. Beyond it,
// stored events are sacrificed first, oldest first: a new event evicts the
// oldest queued stored event (a new stored event with none queued is itself
// dropped). Removed and cleared events, which retract state a subscriber would
// otherwise keep forever, are queued past the soft capacity up to `hard_limit`;
// only there is the oldest event dropped whatever its kind. Every drop is
// counted by kind and reported to the consumer with the next batch, so the
// publisher can reserve the sequence numbers the dropped events would have used
// and the gap is visible to subscribers.
//
// Order: events are handed out in announcement order (by event id) across the
// two internal lanes.
//
// Thread-safety: all methods are thread-safe.
#ifndef TIERKV_EVENTS_EVENT_QUEUE_H_
#define TIERKV_EVENTS_EVENT_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "events/event.h"

namespace tierkv::events {

struct QueueStats {
  uint64_t dropped = 0;
  uint64_t dropped_stored = 0;
  uint64_t dropped_high_priority = 0;  // removed / cleared
  uint64_t size = 0;
  bool consumer_waiting = false;  // a PopBatch is asleep waiting for events now
};

class EventQueue {
 public:
  EventQueue(size_t soft_capacity, size_t hard_limit);

  // Queues `event`, applying the drop policy. Never blocks for long.
  void Push(Event event);

  // Waits up to `wait_ms` for events, then moves up to `max` of them (oldest
  // first) into *out. When fewer than `max` are queued, it first lingers up to
  // `linger_us` for more, so a trickle of events still travels in few messages
  // and producers rarely have to wake the consumer. *dropped_since_last
  // receives how many events were dropped since the previous PopBatch. Returns
  // the number moved.
  size_t PopBatch(std::vector<Event>* out, size_t max, int wait_ms, uint64_t* dropped_since_last,
                  int linger_us = 0);

  // Wakes a waiting PopBatch for good.
  void Close();

  QueueStats Stats() const;
  size_t soft_capacity() const { return soft_; }
  size_t hard_limit() const { return hard_; }

 private:
  void DropOldestStoredLocked();
  void DropOldestLocked();

  const size_t soft_;
  const size_t hard_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> stored_;    // stored events
  std::deque<Event> priority_;  // removed and cleared events
  uint64_t dropped_ = 0;
  uint64_t dropped_stored_ = 0;
  uint64_t dropped_high_ = 0;
  uint64_t pending_gap_ = 0;
  bool closed_ = false;
  bool consumer_waiting_ = false;  // producers notify only a sleeping consumer
};

}  // namespace tierkv::events

#endif  // TIERKV_EVENTS_EVENT_QUEUE_H_
