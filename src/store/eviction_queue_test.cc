// The eviction queues alone, on hooks of their own (no store).
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "store/lru_queue.h"
#include "store/s3fifo_queue.h"

namespace tierkv {
namespace {

struct Item {
  std::string key;
  QueueHook hook;
  bool usable = true;
};

class Items {
 public:
  Item& Add(const std::string& key) {
    Item& it = items_.emplace_back();
    it.key = key;
    it.hook.owner = &it;
    it.hook.key = &it.key;
    return it;
  }
  // The keys of up to `max` victims.
  static std::vector<std::string> Victims(EvictionQueue& q, size_t max, size_t scan = 64) {
    std::vector<QueueHook*> out;
    q.Victims(
        max, scan, [](const QueueHook& h) { return static_cast<Item*>(h.owner)->usable; }, &out);
    std::vector<std::string> keys;
    for (QueueHook* h : out) keys.push_back(*h->key);
    return keys;
  }

 private:
  std::deque<Item> items_;  // stable addresses
};

TEST(LruQueueTest, TheLeastRecentlyTouchedGoFirstAndUnusableOnesAreSkipped) {
  LruQueue q;
  Items items;
  Item& a = items.Add("a");
  Item& b = items.Add("b");
  Item& c = items.Add("c");
  for (Item* it : {&a, &b, &c}) q.Touch(it->hook);
  q.Touch(a.hook);  // now b, c, a from the oldest
  EXPECT_EQ(Items::Victims(q, 2), (std::vector<std::string>{"b", "c"}));
  b.usable = false;
  EXPECT_EQ(Items::Victims(q, 2), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(Items::Victims(q, 3, /*scan=*/1), (std::vector<std::string>{}));  // b only looked at
  q.Erase(c.hook);
  q.Erase(c.hook);  // twice: nothing
  EXPECT_EQ(q.size(), 2u);
  EXPECT_FALSE(c.hook.queued);
  EXPECT_EQ(Items::Victims(q, 3), (std::vector<std::string>{"a"}));
}

TEST(S3FifoQueueTest, NewElementsAreOnProbationAndOneReadAgainMovesToMain) {
  S3FifoQueue q;
  Items items;
  std::vector<Item*> all;
  for (int i = 0; i < 10; ++i) {
    all.push_back(&items.Add("k" + std::to_string(i)));
    q.Touch(all.back()->hook);
  }
  q.Touch(all[0]->hook);  // read again on probation
  EXPECT_TRUE(all[0]->hook.probation);
  // k0 is the oldest but was read: it moves to main, and k1 goes.
  EXPECT_EQ(Items::Victims(q, 1), (std::vector<std::string>{"k1"}));
  EXPECT_FALSE(all[0]->hook.probation);
  EXPECT_EQ(all[0]->hook.freq, 0);
}

TEST(S3FifoQueueTest, AProbationVictimThatComesBackSoonEntersMain) {
  S3FifoQueue q;
  Items items;
  Item& a = items.Add("a");
  Item& b = items.Add("b");
  q.Touch(a.hook);
  q.Touch(b.hook);
  ASSERT_EQ(Items::Victims(q, 1), (std::vector<std::string>{"a"}));
  q.Erase(a.hook);  // evicted: its hash is in the ghost
  q.Touch(a.hook);  // back
  EXPECT_TRUE(a.hook.queued);
  EXPECT_FALSE(a.hook.probation);
  Item& c = items.Add("c");
  q.Touch(c.hook);  // new, unknown: probation
  EXPECT_TRUE(c.hook.probation);
}

TEST(S3FifoQueueTest, ALeasedElementGoesRoundAndTheNextIsTaken) {
  S3FifoQueue q;
  Items items;
  Item& a = items.Add("a");
  Item& b = items.Add("b");
  Item& c = items.Add("c");
  for (Item* it : {&a, &b, &c}) q.Touch(it->hook);
  a.usable = false;
  EXPECT_EQ(Items::Victims(q, 2), (std::vector<std::string>{"b", "c"}));
  b.usable = c.usable = false;
  EXPECT_EQ(Items::Victims(q, 1), (std::vector<std::string>{}));  // bounded: no endless round
  EXPECT_EQ(q.size(), 3u);
}

TEST(EvictionQueueTest, ThePolicyPicksTheQueue) {
  EXPECT_NE(dynamic_cast<S3FifoQueue*>(MakeEvictionQueue(EvictPolicy::kS3Fifo).get()), nullptr);
  EXPECT_NE(dynamic_cast<LruQueue*>(MakeEvictionQueue(EvictPolicy::kLru).get()), nullptr);
}

}  // namespace
}  // namespace tierkv
