#include "events/event_queue.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

namespace tierkv::events {
namespace {

Event Ev(EventType type, uint64_t id) {
  Event e;
  e.type = type;
  e.event_id = id;
  e.key = "k" + std::to_string(id);
  return e;
}

std::vector<uint64_t> Ids(const std::vector<Event>& v) {
  std::vector<uint64_t> out;
  for (const Event& e : v) out.push_back(e.event_id);
  return out;
}

TEST(EventQueue, KeepsAnnouncementOrderAcrossKinds) {
  EventQueue q(100, 200);
  q.Push(Ev(EventType::kStored, 1));
  q.Push(Ev(EventType::kRemoved, 2));
  q.Push(Ev(EventType::kStored, 3));
  q.Push(Ev(EventType::kCleared, 4));
  std::vector<Event> out;
  uint64_t dropped = 0;
  EXPECT_EQ(q.PopBatch(&out, 64, 0, &dropped), 4u);
  EXPECT_EQ(Ids(out), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(dropped, 0u);
}

TEST(EventQueue, PopsAtMostMax) {
  EventQueue q(1000, 2000);
  for (uint64_t i = 1; i <= 150; ++i) q.Push(Ev(EventType::kStored, i));
  std::vector<Event> out;
  uint64_t dropped = 0;
  EXPECT_EQ(q.PopBatch(&out, 64, 0, &dropped), 64u);
  EXPECT_EQ(out.front().event_id, 1u);
  EXPECT_EQ(q.Stats().size, 86u);
}

TEST(EventQueue, FullQueueDropsOldestStoredFirstAndReportsTheGap) {
  EventQueue q(4, 8);
  q.Push(Ev(EventType::kStored, 1));
  q.Push(Ev(EventType::kRemoved, 2));
  q.Push(Ev(EventType::kStored, 3));
  q.Push(Ev(EventType::kStored, 4));
  q.Push(Ev(EventType::kRemoved, 5));  // full: drops stored 1
  q.Push(Ev(EventType::kStored, 6));   // drops stored 3
  QueueStats s = q.Stats();
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.dropped_stored, 2u);
  EXPECT_EQ(s.dropped_high_priority, 0u);
  std::vector<Event> out;
  uint64_t dropped = 0;
  q.PopBatch(&out, 64, 0, &dropped);
  EXPECT_EQ(Ids(out), (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(dropped, 2u);
  out.clear();
  q.PopBatch(&out, 64, 0, &dropped);
  EXPECT_EQ(dropped, 0u);  // reported once
}

TEST(EventQueue, RemovalsOutliveTheSoftCapacityUntilTheHardLimit) {
  EventQueue q(2, 4);
  for (uint64_t i = 1; i <= 4; ++i) q.Push(Ev(EventType::kRemoved, i));
  EXPECT_EQ(q.Stats().size, 4u);  // past the soft capacity, nothing lost
  EXPECT_EQ(q.Stats().dropped, 0u);
  q.Push(Ev(EventType::kStored, 5));  // a stored event is refused instead
  EXPECT_EQ(q.Stats().dropped_stored, 1u);
  q.Push(Ev(EventType::kCleared, 6));  // hard limit: the oldest goes
  QueueStats s = q.Stats();
  EXPECT_EQ(s.dropped_high_priority, 1u);
  EXPECT_EQ(s.dropped, 2u);
  std::vector<Event> out;
  uint64_t dropped = 0;
  q.PopBatch(&out, 64, 0, &dropped);
  EXPECT_EQ(Ids(out), (std::vector<uint64_t>{2, 3, 4, 6}));
  EXPECT_EQ(dropped, 2u);
}

TEST(EventQueue, CloseWakesAWaitingConsumer) {
  EventQueue q(4, 8);
  std::vector<Event> out;
  size_t n = 1;
  std::thread t([&] {
    uint64_t dropped;
    // Without the wake-up this waits for about 24 days: the suite's timeout fails it.
    n = q.PopBatch(&out, 64, std::numeric_limits<int>::max(), &dropped);
  });
  // Close only once the consumer is really asleep in the wait.
  while (!q.Stats().consumer_waiting) std::this_thread::yield();
  q.Close();
  t.join();
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(q.Stats().consumer_waiting);
}

}  // namespace
}  // namespace tierkv::events
