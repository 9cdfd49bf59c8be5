// Eviction: approximate LRU order, watermarks, leased and uncommitted replicas
// skipped, NO_SPACE when nothing can be made, and allocation faults.
#include "store/store_test_util.h"

namespace tierkv {
namespace {

std::string Key(int i) { return "k" + std::to_string(i); }

TEST_F(StoreTest, FullPoolEvictsLeastRecentlyUsedFirst) {
  Make(16 * kMiB, StoreOptions{.shards = 4});
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(Put(Key(i), "v", kMiB).ok());
    clock_.AdvanceMillis(1);
  }
  // Touch the four oldest: they become the most recent.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Get(Key(i)).ok());
    clock_.AdvanceMillis(1);
  }
  observer_.Take();
  ASSERT_TRUE(Put("new", "v", kMiB).ok());  // needs room: evicts the least recently used
  // Exist does not count as a use, so checking does not change the order.
  auto there = [&](int i) { return store_->Exist({}, {"default", Key(i)}).ok(); };
  EXPECT_FALSE(there(4));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(there(i)) << "recently read " << i;
  for (int i = 5; i < 16; ++i) EXPECT_TRUE(there(i)) << i;
  EXPECT_EQ(observer_.Take().front(), "evicted default/k4 dram");
  EXPECT_EQ(store_->admin().Stats().evicted_objects, 1u);  // only what the put needed
  // The rest of the way to the low watermark is the background pass's job; it
  // follows the same order: k5, k6, ... were last used before k0..k3 and "new".
  store_->admin().RunMaintenance();
  EXPECT_LE(Used(), static_cast<uint64_t>(0.8 * 16 * kMiB));
  EXPECT_FALSE(there(5));
  EXPECT_FALSE(there(6));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(there(i)) << i;
  EXPECT_TRUE(store_->Exist({}, {"default", "new"}).ok());
}

TEST_F(StoreTest, BackgroundMaintenanceEvictsBetweenWatermarks) {
  // One shard: which keys go first is then the queue's order alone, whatever
  // the shard count (a TSan build has fewer shards, and other collisions).
  StoreOptions one_shard;
  one_shard.shards = 1;
  Make(16 * kMiB, one_shard);
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE(Put(Key(i), "v", kMiB).ok());
    clock_.AdvanceMillis(1);
  }
  EXPECT_EQ(Used(), 15 * kMiB);  // 93.75% > high watermark
  const size_t evicted = store_->admin().RunMaintenance();
  EXPECT_EQ(evicted, 3u);  // down to 12 MiB = 75% <= 80%
  EXPECT_EQ(Used(), 12 * kMiB);
  EXPECT_EQ(Get(Key(0)).code(), Code::kNotFound);
  EXPECT_TRUE(Get(Key(3)).ok());
  EXPECT_EQ(store_->admin().RunMaintenance(), 0u);  // below the high watermark: nothing
}

TEST_F(StoreTest, LeasedAndUncommittedReplicasAreNeverEvicted) {
  Make(3 * kMiB);
  ASSERT_TRUE(Put("leased", "L", kMiB).ok());
  clock_.AdvanceMillis(1);
  ASSERT_TRUE(Put("free", "F", kMiB).ok());
  auto lease = store_->Lease({}, {"default", "leased"});
  clock_.AdvanceMillis(1);
  auto pending = store_->Alloc({}, {"default", "pending"}, kMiB, {});
  ASSERT_TRUE(pending.ok());
  clock_.AdvanceMillis(1);
  ASSERT_TRUE(Put("more", "M", kMiB).ok());  // only "free" may go
  EXPECT_EQ(store_->Exist({}, {"default", "free"}).code(), Code::kNotFound);
  EXPECT_TRUE(store_->Exist({}, {"default", "leased"}).ok());
  EXPECT_TRUE(store_->Commit({}, pending->alloc_id).ok());
  EXPECT_TRUE(store_->Release({}, lease->lease_id).ok());
  // With the lease gone, the oldest ("leased") is the next victim.
  clock_.AdvanceMillis(1);
  ASSERT_TRUE(Put("last", "X", kMiB).ok());
  EXPECT_EQ(store_->Exist({}, {"default", "leased"}).code(), Code::kNotFound);
  EXPECT_TRUE(store_->Exist({}, {"default", "pending"}).ok());
}

TEST_F(StoreTest, NoSpaceWhenEverythingIsLeasedAndNothingIsHarmed) {
  Make(4 * kMiB);
  std::vector<uint64_t> leases;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Put(Key(i), "value-" + std::to_string(i), kMiB).ok());
    leases.push_back(store_->Lease({}, {"default", Key(i)})->lease_id);
  }
  Status st = Put("more", "x", kMiB);
  EXPECT_EQ(st.code(), Code::kNoSpace);
  EXPECT_NE(st.message().find("leased"), std::string::npos);
  EXPECT_EQ(store_->Exist({}, {"default", "more"}).code(), Code::kNotFound);
  for (uint64_t id : leases) EXPECT_TRUE(store_->Release({}, id).ok());
  for (int i = 0; i < 4; ++i) {
    auto v = Get(Key(i));
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->substr(0, 7), "value-" + std::to_string(i));
  }
  // An object larger than the pool can never fit.
  EXPECT_EQ(Put("huge", "x", 5 * kMiB).code(), Code::kNoSpace);
  // Once leases are gone the same put succeeds by evicting.
  EXPECT_TRUE(Put("more", "x", kMiB).ok());
}

TEST_F(StoreTest, ExpiredLeasesDoNotBlockEviction) {
  Make(2 * kMiB);
  ASSERT_TRUE(Put("a", "A", kMiB).ok());
  ASSERT_TRUE(Put("b", "B", kMiB).ok());
  auto la = store_->Lease({}, {"default", "a"});
  auto lb = store_->Lease({}, {"default", "b"});
  EXPECT_EQ(Put("c", "C", kMiB).code(), Code::kNoSpace);
  clock_.AdvanceMillis(2001);
  EXPECT_TRUE(Put("c", "C", kMiB).ok());
  EXPECT_EQ(store_->Release({}, la->lease_id).code(), Code::kLeaseExpired);
  EXPECT_EQ(store_->Release({}, lb->lease_id).code(), Code::kLeaseExpired);
}

TEST_F(StoreTest, InjectedAllocationFailureIsNoSpace) {
  dram().SetAllocationFaultHook([](uint64_t) { return true; });
  EXPECT_EQ(Put("k", "v").code(), Code::kNoSpace);
  dram().SetAllocationFaultHook(nullptr);
  EXPECT_TRUE(Put("k", "v").ok());
}

}  // namespace
}  // namespace tierkv
