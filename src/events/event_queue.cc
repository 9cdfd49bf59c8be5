#include "events/event_queue.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace tierkv::events {

std::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kStored:
      return "stored";
    case EventType::kRemoved:
      return "removed";
    case EventType::kCleared:
      return "cleared";
  }
  return "unknown";
}

std::string_view LegacyTypeName(EventType type) {
  switch (type) {
    case EventType::kStored:
      return "BlockStored";
    case EventType::kRemoved:
      return "BlockRemoved";
    case EventType::kCleared:
      return "AllBlocksCleared";
  }
  return "unknown";
}

std::string_view WireMedium(Medium medium) { return medium == Medium::kSsd ? "disk" : "cpu"; }

EventQueue::EventQueue(size_t soft_capacity, size_t hard_limit)
    : soft_(std::max<size_t>(1, soft_capacity)), hard_(std::max(hard_limit, soft_)) {}

void EventQueue::DropOldestStoredLocked() {
  stored_.pop_front();
  ++dropped_;
  ++dropped_stored_;
  ++pending_gap_;
}

void EventQueue::DropOldestLocked() {
  const bool take_stored =
      !stored_.empty() &&
      (priority_.empty() || stored_.front().event_id < priority_.front().event_id);
  if (take_stored) {
    DropOldestStoredLocked();
    return;
  }
  priority_.pop_front();
  ++dropped_;
  ++dropped_high_;
  ++pending_gap_;
}

void EventQueue::Push(Event event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t size = stored_.size() + priority_.size();
    const bool is_stored = event.type == EventType::kStored;
    if (size >= soft_) {
      if (!stored_.empty()) {
        DropOldestStoredLocked();
      } else if (is_stored) {
        ++dropped_;  // the new stored event is the oldest stored one: it goes
        ++dropped_stored_;
        ++pending_gap_;
        return;
      } else if (size >= hard_) {
        DropOldestLocked();
      }
    }
    (is_stored ? stored_ : priority_).push_back(std::move(event));
    if (!consumer_waiting_) return;
  }
  cv_.notify_one();
}

size_t EventQueue::PopBatch(std::vector<Event>* out, size_t max, int wait_ms,
                            uint64_t* dropped_since_last, int linger_us) {
  std::unique_lock<std::mutex> lock(mu_);
  consumer_waiting_ = true;
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
               [this] { return closed_ || !stored_.empty() || !priority_.empty(); });
  consumer_waiting_ = false;
  if (linger_us > 0 && !closed_ && stored_.size() + priority_.size() < max) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(linger_us));
    lock.lock();
  }
  size_t n = 0;
  while (n < max && (!stored_.empty() || !priority_.empty())) {
    const bool take_stored =
        !stored_.empty() &&
        (priority_.empty() || stored_.front().event_id < priority_.front().event_id);
    std::deque<Event>& lane = take_stored ? stored_ : priority_;
    out->push_back(std::move(lane.front()));
    lane.pop_front();
    ++n;
  }
  *dropped_since_last = pending_gap_;
  pending_gap_ = 0;
  return n;
}

void EventQueue::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

QueueStats EventQueue::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return QueueStats{dropped_, dropped_stored_, dropped_high_, stored_.size() + priority_.size(),
                    consumer_waiting_};
}

}  // namespace tierkv::events
