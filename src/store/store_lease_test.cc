// Read leases and write grants against an injected clock.
#include <set>
#include <string_view>
#include <vector>

#include "store/store_test_util.h"

namespace tierkv {
namespace {

TEST_F(StoreTest, LeaseKeepsRemovedBytesUntilReleased) {
  ASSERT_TRUE(Put("k", "payload", kMiB).ok());
  auto lease = store_->Lease({}, {"default", "k"});
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store_->Remove({}, {"default", "k"}).ok());
  EXPECT_EQ(Get("k").code(), Code::kNotFound);  // hidden at once
  EXPECT_EQ(Used(), kMiB);                      // but not freed
  EXPECT_EQ(store_->admin().Stats().zombie_bytes, kMiB);
  // A new object cannot land on the leased bytes.
  ASSERT_TRUE(Put("other", "x", kMiB).ok());
  auto other = store_->Lease({}, {"default", "other"});
  EXPECT_NE(other->offset, lease->offset);
  EXPECT_TRUE(store_->Release({}, other->lease_id).ok());
  EXPECT_EQ(std::memcmp(dram().base() + lease->offset, "payload", 7), 0);
  EXPECT_TRUE(store_->Release({}, lease->lease_id).ok());
  EXPECT_EQ(Used(), kMiB);  // only "other" remains
  EXPECT_EQ(store_->admin().Stats().zombie_bytes, 0u);
}

TEST_F(StoreTest, ReleaseAfterTheDeadlineIsLeaseExpired) {
  ASSERT_TRUE(Put("k", "v").ok());
  auto lease = store_->Lease({}, {"default", "k"});
  ASSERT_TRUE(lease.ok());
  clock_.AdvanceMillis(2001);
  EXPECT_EQ(store_->Release({}, lease->lease_id).code(), Code::kLeaseExpired);
  EXPECT_EQ(store_->Release({}, lease->lease_id).code(), Code::kNotFound);
}

TEST_F(StoreTest, ExpiredLeaseStillAnswersLeaseExpiredAfterItWasReaped) {
  ASSERT_TRUE(Put("k", "v", kMiB).ok());
  auto lease = store_->Lease({/*session=*/7, 0}, {"default", "k"});
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store_->Remove({}, {"default", "k"}).ok());
  clock_.AdvanceMillis(2001);
  store_->admin().RunMaintenance();
  EXPECT_EQ(Used(), 0u);  // the zombie was freed when its lease expired
  EXPECT_EQ(store_->admin().Stats().expired_leases, 1u);
  // The range may now be reused: the late reader must learn its copy is void.
  EXPECT_EQ(store_->Release({7, 0}, lease->lease_id).code(), Code::kLeaseExpired);
}

TEST_F(StoreTest, LeaseTombstonesAreForgottenEventually) {
  ASSERT_TRUE(Put("k", "v").ok());
  auto lease = store_->Lease({7, 0}, {"default", "k"});
  clock_.AdvanceMillis(2001);
  store_->admin().RunMaintenance();
  clock_.AdvanceMillis(60001);
  store_->admin().RunMaintenance();
  EXPECT_EQ(store_->Release({}, lease->lease_id).code(), Code::kNotFound);
}

TEST_F(StoreTest, UncommittedAllocIsRevokedAfterTheTimeout) {
  auto g = store_->Alloc({}, {"default", "k"}, kMiB, {});
  ASSERT_TRUE(g.ok());
  clock_.AdvanceMillis(30001);
  EXPECT_EQ(store_->Commit({}, g->alloc_id).code(), Code::kLeaseExpired);
  EXPECT_EQ(Used(), 0u);
  EXPECT_TRUE(Put("k", "fresh").ok());  // the key is free again
  EXPECT_EQ(store_->admin().Stats().revoked_allocs, 1u);
}

TEST_F(StoreTest, RevokedGrantOfALiveSessionIsQuarantinedUntilTheSessionEnds) {
  auto g = store_->Alloc({/*session=*/9, 0}, {"default", "k"}, kMiB, {});
  ASSERT_TRUE(g.ok());
  clock_.AdvanceMillis(30001);
  store_->admin().RunMaintenance();
  EXPECT_EQ(store_->Exist({}, {"default", "k"}).code(), Code::kNotFound);
  EXPECT_EQ(store_->Commit({9, 0}, g->alloc_id).code(), Code::kNotFound);
  // The slow writer may still be copying: the range is not reused yet.
  EXPECT_EQ(Used(), kMiB);
  EXPECT_EQ(store_->admin().Stats().quarantined_bytes, kMiB);
  store_->EndSession(9);
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(store_->admin().Stats().quarantined_bytes, 0u);
}

TEST_F(StoreTest, UpsertWhileReadersHoldTheOldValue) {
  ASSERT_TRUE(Put("k", "old-value").ok());
  auto lease = store_->Lease({}, {"default", "k"});
  ASSERT_TRUE(Put("k", "new-value", 0, true).ok());
  EXPECT_EQ(*Get("k"), "new-value");
  // The reader of the old value still sees intact bytes and releases cleanly.
  EXPECT_EQ(std::memcmp(dram().base() + lease->offset, "old-value", 9), 0);
  EXPECT_TRUE(store_->Release({}, lease->lease_id).ok());
  EXPECT_EQ(dram().Stats().live_allocations, 1u);
}

TEST_F(StoreTest, QueryReportsActiveLeases) {
  ASSERT_TRUE(Put("k", "v").ok());
  auto a = store_->Lease({}, {"default", "k"});
  auto b = store_->Lease({}, {"default", "k"});
  auto info = store_->Query({}, {"default", "k"});
  EXPECT_EQ(info->active_leases, 2u);
  EXPECT_GT(info->lease_expires_unix_ms, 0);
  EXPECT_TRUE(store_->Release({}, a->lease_id).ok());
  EXPECT_TRUE(store_->Release({}, b->lease_id).ok());
  EXPECT_EQ(store_->Query({}, {"default", "k"})->active_leases, 0u);
}

TEST_F(StoreTest, GrantsAndLeasesAnswerOnlyTheirOwnSession) {
  auto g = store_->Alloc({/*session=*/1, 0}, {"default", "k"}, 4096, {});
  ASSERT_TRUE(g.ok());
  // Another session can neither commit nor abort the grant...
  EXPECT_EQ(store_->Commit({2, 0}, g->alloc_id).code(), Code::kNotFound);
  EXPECT_EQ(store_->Abort({2, 0}, g->alloc_id).code(), Code::kNotFound);
  EXPECT_EQ(store_->BatchCommit({2, 0}, std::vector<uint64_t>{g->alloc_id})[0].code(),
            Code::kNotFound);
  EXPECT_EQ(store_->Exist({}, {"default", "k"}).code(), Code::kNotFound);  // still unreadable
  ASSERT_TRUE(store_->Commit({1, 0}, g->alloc_id).ok());                   // ...its owner can
  auto lease = store_->Lease({1, 0}, {"default", "k"});
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(store_->Release({2, 0}, lease->lease_id).code(), Code::kNotFound);
  EXPECT_EQ(store_->BatchRelease({2, 0}, std::vector<uint64_t>{lease->lease_id})[0].code(),
            Code::kNotFound);
  EXPECT_EQ(store_->admin().Stats().active_leases, 1u);
  // The lease still protects the range: an upsert gets new memory.
  ASSERT_TRUE(Put("k", "new value", 4096, /*upsert=*/true).ok());
  EXPECT_EQ(Used(), 2 * 4096u);
  EXPECT_TRUE(store_->Release({1, 0}, lease->lease_id).ok());
  EXPECT_EQ(Used(), 4096u);
}

// Leases come and go many times over in one shard (their records are reused
// once released): each is released once, by its own id, the ones still held
// stay intact, and a double release is refused.
TEST_F(StoreTest, ManyLeasesOverOneShardEachEndOnce) {
  StoreOptions o;
  o.shards = 1;
  Make(16 * kMiB, o);
  ASSERT_TRUE(Put("k", "v").ok());
  std::vector<uint64_t> held;
  for (int round = 0; round < 300; ++round) {
    auto a = store_->Lease({}, {"default", "k"});
    auto b = store_->BatchLease({}, "default", std::vector<std::string_view>{"k", "k"});
    ASSERT_TRUE(a.ok() && b[0].ok() && b[1].ok());
    EXPECT_NE(a->lease_id, b[0]->lease_id);
    EXPECT_NE(b[0]->lease_id, b[1]->lease_id);
    if (round % 3 == 0)
      held.push_back(a->lease_id);  // some are kept for later
    else
      ASSERT_TRUE(store_->Release({}, a->lease_id).ok());
    const auto released =
        store_->BatchRelease({}, std::vector<uint64_t>{b[0]->lease_id, b[1]->lease_id});
    ASSERT_TRUE(released[0].ok() && released[1].ok());
    EXPECT_EQ(store_->Release({}, b[1]->lease_id).code(), Code::kNotFound);
  }
  EXPECT_EQ(store_->admin().Stats().active_leases, held.size());
  for (uint64_t id : held) EXPECT_TRUE(store_->Release({}, id).ok());
  for (uint64_t id : held) EXPECT_EQ(store_->Release({}, id).code(), Code::kNotFound);
  EXPECT_EQ(store_->admin().Stats().active_leases, 0u);
}

TEST_F(StoreTest, IdsAreNotSequential) {
  std::set<uint64_t> high;
  uint64_t previous = 0;
  int adjacent = 0;
  for (int i = 0; i < 64; ++i) {
    auto g = store_->Alloc({}, {"default", "k" + std::to_string(i)}, 64, {});
    ASSERT_TRUE(g.ok());
    high.insert(g->alloc_id >> 8);
    if (previous != 0 && ((g->alloc_id >> 8) == (previous >> 8) + 1)) ++adjacent;
    previous = g->alloc_id;
  }
  EXPECT_EQ(high.size(), 64u);
  EXPECT_EQ(adjacent, 0);
}

}  // namespace
}  // namespace tierkv
