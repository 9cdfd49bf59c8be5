// Store lifecycle: two-phase put, duplicates, upsert, remove, remove_all, batches,
// validation, and the sharded index under concurrency.
#include "store/store.h"

#include <atomic>
#include <thread>

#include "store/store_test_util.h"

namespace tierkv {
namespace {

TEST_F(StoreTest, AllocatedValueIsInvisibleUntilCommit) {
  auto g = store_->Alloc({}, {"default", "k"}, 5, {});
  ASSERT_TRUE(g.ok());
  std::memcpy(dram().base() + g->offset, "hello", 5);
  EXPECT_EQ(store_->Exist({}, {"default", "k"}).code(), Code::kNotFound);
  EXPECT_EQ(Get("k").code(), Code::kNotFound);
  EXPECT_TRUE(observer_.Take().empty());
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  EXPECT_EQ(*Get("k"), "hello");
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"stored default/k dram"});
  EXPECT_EQ(store_->Commit({}, g->alloc_id).code(), Code::kNotFound);  // once only
}

TEST_F(StoreTest, PutOnExistingKeyIsDuplicatedAndKeepsTheValue) {
  ASSERT_TRUE(Put("k", "one").ok());
  Status st = Put("k", "two");
  EXPECT_EQ(st.code(), Code::kDuplicated);
  EXPECT_EQ(*Get("k"), "one");
  // A second put while the first is in flight is also refused.
  auto g = store_->Alloc({}, {"default", "p"}, 10, {});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(store_->Alloc({}, {"default", "p"}, 10, {}).code(), Code::kDuplicated);
  EXPECT_EQ(store_->Alloc({}, {"default", "p"}, 10, {"", true}).code(), Code::kRetry);
  const OpCounts alloc = store_->admin().op_stats().Get(Op::kAlloc);
  EXPECT_EQ(alloc.failure, 3u);  // DUPLICATED counts as a failure
}

TEST_F(StoreTest, UpsertReplacesAndAnnouncesRemovedThenStored) {
  ASSERT_TRUE(Put("k", "old").ok());
  observer_.Take();
  ASSERT_TRUE(Put("k", "newer", 0, /*upsert=*/true).ok());
  EXPECT_EQ(*Get("k"), "newer");
  EXPECT_EQ(observer_.Take(),
            (std::vector<std::string>{"replaced default/k dram", "stored default/k dram"}));
  // The old value's space was returned.
  EXPECT_EQ(dram().Stats().live_allocations, 1u);
}

TEST_F(StoreTest, AbortFreesTheReservation) {
  auto g = store_->Alloc({}, {"default", "k"}, kMiB, {});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Used(), kMiB);
  ASSERT_TRUE(store_->Abort({}, g->alloc_id).ok());
  EXPECT_EQ(Used(), 0u);
  EXPECT_TRUE(Put("k", "v").ok());  // the key is free again
}

TEST_F(StoreTest, RemoveHidesAtOnceAndMissesAreNotFound) {
  ASSERT_TRUE(Put("k", "v").ok());
  ASSERT_TRUE(store_->Remove({}, {"default", "k"}).ok());
  EXPECT_EQ(Get("k").code(), Code::kNotFound);
  EXPECT_EQ(store_->Remove({}, {"default", "k"}).code(), Code::kNotFound);
  EXPECT_EQ(store_->Query({}, {"default", "k"}).code(), Code::kNotFound);
  EXPECT_EQ(Used(), 0u);
  const OpCounts rm = store_->admin().op_stats().Get(Op::kRemove);
  EXPECT_EQ(rm.requests, 2u);
  EXPECT_EQ(rm.success, 1u);
  EXPECT_EQ(rm.not_found, 1u);
  EXPECT_EQ(rm.failure, 0u);
}

// RemoveIfAt removes only the value at the generation named (a stale copy
// dropped), never a newer one put meanwhile; it is not a client remove.
TEST_F(StoreTest, RemoveIfAtRemovesOnlyTheValueOfThatGeneration) {
  auto g = store_->Alloc({}, {"default", "k"}, 1, {});
  ASSERT_TRUE(g.ok());
  uint64_t first = 0;
  ASSERT_TRUE(store_->Commit({}, g->alloc_id, {}, &first).ok());
  ASSERT_NE(first, 0u);
  ASSERT_TRUE(Put("k", "w", 0, /*upsert=*/true).ok());
  (void)observer_.Take();
  EXPECT_EQ(store_->admin().RemoveIfAt({"default", "k"}, first).code(), Code::kNotFound);
  EXPECT_EQ(*Get("k"), "w");
  Result<PinGrant> pin = store_->pins().Pin(9, {"default", "k"}, 0, 0);
  ASSERT_TRUE(pin.ok());
  const uint64_t second = pin->generation;
  ASSERT_TRUE(store_->pins().Unpin(9, pin->pin_id).ok());
  EXPECT_GT(second, first);
  EXPECT_TRUE(store_->admin().RemoveIfAt({"default", "k"}, second).ok());
  EXPECT_EQ(Get("k").code(), Code::kNotFound);
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"removed default/k dram"});
  EXPECT_EQ(store_->admin().RemoveIfAt({"default", "k"}, second).code(), Code::kNotFound);
  EXPECT_EQ(store_->admin().op_stats().Get(Op::kRemove).requests, 0u);
}

TEST_F(StoreTest, TenantsAreSeparateNamespaces) {
  ASSERT_TRUE(Put("k", "a", 0, false, "t1").ok());
  ASSERT_TRUE(Put("k", "b", 0, false, "t2").ok());
  EXPECT_EQ(*Get("k", "t1"), "a");
  EXPECT_EQ(*Get("k", "t2"), "b");
  EXPECT_EQ(Get("k").code(), Code::kNotFound);
  auto keys = store_->ListKeys({}, "t1", "", 0);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, std::vector<std::string>{"k"});
}

TEST_F(StoreTest, KeysAreOpaqueBytes) {
  const std::string key("a\0b/\xff", 5);
  ASSERT_TRUE(Put(key, "v").ok());
  EXPECT_EQ(*Get(key), "v");
  EXPECT_EQ(Get(std::string("a\0c/\xff", 5)).code(), Code::kNotFound);
  EXPECT_EQ((*store_->ListKeys({}, "default", "", 0))[0], key);
}

TEST_F(StoreTest, ValidatesKeysTenantsAndSizes) {
  EXPECT_EQ(store_->Alloc({}, {"default", ""}, 1, {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Alloc({}, {"", "k"}, 1, {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Alloc({}, {std::string_view("a\0b", 3), "k"}, 1, {}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->Alloc({}, {"default", std::string(1025, 'k')}, 1, {}).code(), Code::kTooLarge);
  EXPECT_EQ(store_->Alloc({}, {"default", "k"}, 0, {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Alloc({}, {"default", "k"}, (256ull << 20) + 1, {}).code(), Code::kTooLarge);
  EXPECT_EQ(store_->Alloc({}, {"default", "k"}, 17 * kMiB, {}).code(), Code::kNoSpace);
  EXPECT_EQ(store_->Lease({}, {"default", ""}).code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, GroupIdIsKeptAndQueried) {
  auto g = store_->Alloc({}, {"default", "k"}, 3, {"layer-7", false});
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  auto info = store_->Query({}, {"default", "k"});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->group_id, "layer-7");
  EXPECT_EQ(info->size, 3u);
  EXPECT_EQ(info->media, MediumBit(Medium::kDram));
  EXPECT_EQ(info->state, ReplicaState::kReadable);
}

TEST_F(StoreTest, RemoveAllClearsOnlyWhenTheTenantIsEmptied) {
  auto clear = [&](std::string_view t, bool force) { return *store_->RemoveAll({}, t, force); };
  // An empty tenant: nothing removed, no cleared.
  RemoveAllResult r = clear("t", false);
  EXPECT_EQ(r.removed, 0u);
  EXPECT_FALSE(r.cleared);
  EXPECT_TRUE(observer_.Take().empty());

  ASSERT_TRUE(Put("a", "1", 0, false, "t").ok());
  ASSERT_TRUE(Put("b", "2", 0, false, "t").ok());
  ASSERT_TRUE(Put("c", "3", 0, false, "other").ok());
  auto lease = store_->Lease({}, {"t", "b"});
  ASSERT_TRUE(lease.ok());
  observer_.Take();
  r = clear("t", false);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_FALSE(r.cleared);
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"removed t/a dram"});
  EXPECT_EQ(*Get("b", "t"), "2");

  r = clear("t", true);  // force removes the leased one
  EXPECT_EQ(r.removed, 1u);
  EXPECT_TRUE(r.cleared);
  EXPECT_EQ(observer_.Take(), (std::vector<std::string>{"removed t/b dram", "cleared t"}));
  EXPECT_EQ(*Get("c", "other"), "3");
  // The leased bytes stay allocated until the lease ends.
  EXPECT_EQ(dram().Stats().live_allocations, 2u);
  EXPECT_TRUE(store_->Release({}, lease->lease_id).ok());
  EXPECT_EQ(dram().Stats().live_allocations, 1u);
}

TEST_F(StoreTest, BatchesKeepOrderAndCountByTheRules) {
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("c", "3").ok());
  std::vector<std::string_view> keys = {"a", "b", "c", ""};
  std::vector<Status> exist = store_->BatchExist({}, "default", keys);
  ASSERT_EQ(exist.size(), 4u);
  EXPECT_TRUE(exist[0].ok());
  EXPECT_EQ(exist[1].code(), Code::kNotFound);
  EXPECT_TRUE(exist[2].ok());
  EXPECT_EQ(exist[3].code(), Code::kInvalidArgument);
  // One real error: the batch is a failure; items are added to exist_key.
  EXPECT_EQ(store_->admin().op_stats().Get(Op::kBatchExistKey).failure, 1u);
  OpCounts single = store_->admin().op_stats().Get(Op::kExistKey);
  EXPECT_EQ(single.requests, 4u);
  EXPECT_EQ(single.success, 2u);
  EXPECT_EQ(single.not_found, 1u);
  EXPECT_EQ(single.failure, 1u);

  // Only misses: the batch is not_found, not a failure.
  std::vector<std::string_view> q = {"a", "zz"};
  auto infos = store_->BatchQuery({}, "default", q);
  EXPECT_TRUE(infos[0].ok());
  EXPECT_EQ(infos[1].code(), Code::kNotFound);
  OpCounts bq = store_->admin().op_stats().Get(Op::kBatchQuery);
  EXPECT_EQ(bq.not_found, 1u);
  EXPECT_EQ(bq.failure, 0u);

  std::vector<AllocItem> items = {{"x", 4, {}}, {"a", 4, {}}, {"y", 4, {}}};
  auto grants = store_->BatchAlloc({}, "default", items);
  EXPECT_TRUE(grants[0].ok());
  EXPECT_EQ(grants[1].code(), Code::kDuplicated);
  EXPECT_TRUE(grants[2].ok());
  std::vector<uint64_t> ids = {grants[2]->alloc_id, 12345, grants[0]->alloc_id};
  auto commits = store_->BatchCommit({}, ids);
  EXPECT_TRUE(commits[0].ok());
  EXPECT_EQ(commits[1].code(), Code::kNotFound);
  EXPECT_TRUE(commits[2].ok());
  EXPECT_EQ(store_->admin().op_stats().Get(Op::kUpdateState).requests, 3u + 2u);  // 2 from Put()

  std::vector<std::string_view> lk = {"y", "nope", "x"};
  auto leases = store_->BatchLease({}, "default", lk);
  EXPECT_TRUE(leases[0].ok());
  EXPECT_EQ(leases[1].code(), Code::kNotFound);
  EXPECT_TRUE(leases[2].ok());
  std::vector<uint64_t> lids = {leases[0]->lease_id, leases[2]->lease_id};
  for (const Status& st : store_->BatchRelease({}, lids)) EXPECT_TRUE(st.ok());

  std::vector<std::string_view> rk = {"x", "y", "x"};
  auto removed = store_->BatchRemove({}, "default", rk);
  EXPECT_TRUE(removed[0].ok());
  EXPECT_TRUE(removed[1].ok());
  EXPECT_EQ(removed[2].code(), Code::kNotFound);
}

// Batches longer than the lookup window, spread over every shard, with misses,
// invalid keys and repeats: each item's answer is the single-key answer.
TEST_F(StoreTest, LongBatchesAnswerEachItemAsASingleLookupWould) {
  Make(64 * kMiB);
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back("k" + std::to_string(i));
    if (i % 3 != 0) {
      ASSERT_TRUE(Put(names.back(), "v" + std::to_string(i)).ok());
    }
  }
  names.push_back("");        // invalid
  names.push_back(names[1]);  // a repeat of a stored key
  names.push_back(names[3]);  // a repeat of a miss
  const std::vector<std::string_view> keys(names.begin(), names.end());
  const std::vector<Status> exist = store_->BatchExist({}, "default", keys);
  const auto infos = store_->BatchQuery({}, "default", keys);
  const auto leases = store_->BatchLease({}, "default", keys);
  ASSERT_EQ(exist.size(), keys.size());
  ASSERT_EQ(infos.size(), keys.size());
  ASSERT_EQ(leases.size(), keys.size());
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Status single = store_->Exist({}, {"default", keys[i]});
    EXPECT_EQ(exist[i].code(), single.code()) << i;
    EXPECT_EQ(infos[i].code(), single.code()) << i;
    EXPECT_EQ(leases[i].code(), single.code()) << i;
    if (!leases[i].ok()) continue;
    const std::string want = "v" + std::string(keys[i].substr(1));
    EXPECT_EQ(infos[i]->size, want.size()) << i;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(dram().base() + leases[i]->offset),
                          leases[i]->size),
              want)
        << i;
    ids.push_back(leases[i]->lease_id);
  }
  EXPECT_EQ(ids.size(), 201u);  // 200 stored keys and the repeat
  for (const Status& st : store_->BatchRelease({}, ids)) EXPECT_TRUE(st.ok());
  EXPECT_EQ(store_->admin().Stats().active_leases, 0u);
  // Removal goes through the same windows: each stored key once, the repeat
  // of a stored key finds it gone, misses and the invalid key as before.
  const std::vector<Status> removed = store_->BatchRemove({}, "default", keys);
  ASSERT_EQ(removed.size(), keys.size());
  size_t ok = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (removed[i].ok()) {
      ++ok;
      continue;
    }
    EXPECT_EQ(removed[i].code(), i == 300 ? Code::kInvalidArgument : Code::kNotFound) << i;
  }
  EXPECT_EQ(ok, 200u);
  EXPECT_EQ(removed[301].code(), Code::kNotFound);  // the repeat of names[1]
  EXPECT_EQ(store_->admin().Stats().objects, 0u);
}

// Batched lookups hold several shard locks at a time. Running them beside
// writers, removals, whole-tenant removal (which takes every shard lock) and
// snapshots must neither deadlock nor show a reader anything but whole values
// of the keys nobody removes.
TEST_F(StoreTest, BatchedLookupsBesideWritersAndWholeStoreLocksStayConsistent) {
  // 16 shards: ThreadSanitizer's lock-order checker follows at most 64 locks
  // held at once, and RemoveAll holds every shard's and the observer's.
  StoreOptions opts;
  opts.shards = 16;
  Make(64 * kMiB, opts);
  constexpr int kKeys = 256;
  std::vector<std::string> stable;
  for (int i = 0; i < kKeys; ++i) {
    stable.push_back("s" + std::to_string(i));
    ASSERT_TRUE(Put(stable.back(), stable.back() + "=").ok());
  }
  const std::vector<std::string_view> keys(stable.begin(), stable.end());
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        for (const Status& st : store_->BatchExist({}, "default", keys)) {
          if (!st.ok()) ++errors;
        }
        const auto leases = store_->BatchLease({}, "default", keys);
        std::vector<uint64_t> ids;
        for (size_t i = 0; i < leases.size(); ++i) {
          if (!leases[i].ok()) {
            ++errors;
            continue;
          }
          const std::string got(reinterpret_cast<const char*>(dram().base() + leases[i]->offset),
                                leases[i]->size);
          if (got != std::string(keys[i]) + "=") ++errors;
          ids.push_back(leases[i]->lease_id);
        }
        for (const Status& st : store_->BatchRelease({}, ids)) {
          if (!st.ok()) ++errors;
        }
      }
    });
  }
  // Writers in the same shards and in another tenant, which is removed whole
  // and snapshotted over and over.
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 64; ++i) {
      const std::string key = "w" + std::to_string(i);
      (void)Put(key, key, 0, /*upsert=*/true);
      (void)Put(key, key, 0, /*upsert=*/true, "other");
    }
    for (int i = 0; i < 64; ++i) (void)store_->Remove({}, {"default", "w" + std::to_string(i)});
    (void)store_->RemoveAll({}, "other", /*force=*/true);
    (void)store_->admin().Snapshot(64, [](std::span<const SnapshotRecord>) {});
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(store_->admin().Stats().active_leases, 0u);
  EXPECT_EQ(store_->admin().Stats().objects, static_cast<uint64_t>(kKeys));
}

TEST_F(StoreTest, ConcurrentClientsOnManyShardsStayConsistent) {
  Make(64 * kMiB);
  constexpr int kThreads = 4;
  constexpr int kKeys = 300;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
          const std::string value = key + "#" + std::to_string(round);
          if (!Put(key, value, 0, /*upsert=*/true, "default", t + 1).ok()) ++errors;
          auto got = Get(key);
          if (!got.ok() || *got != value) ++errors;
          // A key shared by every thread: upserts race, reads must see a whole value.
          (void)Put("shared", "value-from-" + std::to_string(t), 0, true);
          auto shared = Get("shared");
          if (shared.ok() && shared->rfind("value-from-", 0) != 0) ++errors;
        }
        for (int i = 0; i < kKeys; i += 2) {
          const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
          if (!store_->Remove({}, {"default", key}).ok()) ++errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const StoreStats s = store_->admin().Stats();
  EXPECT_EQ(s.objects, static_cast<uint64_t>(kThreads * kKeys / 2 + 1));
  EXPECT_EQ(s.pending_allocs, 0u);
  EXPECT_EQ(s.active_leases, 0u);
  EXPECT_EQ(s.dram.live_allocations, s.objects);
}

}  // namespace
}  // namespace tierkv
