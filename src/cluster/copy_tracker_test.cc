// CopyTracker over a real store and global index: a copy stays while its
// owner's view holds its value (through a demotion there), goes once the view
// shows it replaced or removed, waits for a view that has not reached the
// pin yet, is judged again when a view is installed, goes with a failed
// stream or a departed owner, and a local put ends its tracking.
#include "cluster/copy_tracker.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tierkv {
namespace {

InventoryDelta Change(InventoryDelta::Kind kind, const std::string& key, uint64_t gen,
                      Medium medium = Medium::kDram) {
  InventoryDelta d;
  d.kind = kind;
  d.tenant = "t";
  d.key = key;
  d.size = 5;
  d.generation = gen;
  d.medium = medium;
  return d;
}

class CopyTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = DramPool::Create(8 << 20);
    ASSERT_TRUE(pool.ok());
    auto store = Store::Create({}, std::move(*pool));
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    tracker_ = std::make_unique<CopyTracker>(store_.get(), &index_);
    store_->AddObserver(tracker_.get());
    index_.SetExpected({{"a", {"ua", 0, 1}}});
  }

  // Installs a's view holding `changes` at `watermark`.
  void Install(uint64_t watermark, const std::vector<InventoryDelta>& changes) {
    auto view = std::make_unique<OwnerView>();
    view->ApplyAll(changes);
    index_.BeginStaging();
    index_.Install("a", "ua", std::move(view), watermark, 0);
    watermark_ = watermark;
    tracker_->OnInstalled("a");
  }
  // Applies `changes` to a's view as one batch, then tells the tracker.
  void Apply(const std::vector<InventoryDelta>& changes) {
    ASSERT_TRUE(index_.ApplyDeltas("a", watermark_ + 1, watermark_ + changes.size(), changes));
    watermark_ += changes.size();
    tracker_->OnChanges("a", changes);
  }
  // Stores `value` here as a fetched copy would be; returns its generation.
  uint64_t Commit(const std::string& key, const std::string& value, bool copy = true) {
    PutOptions o;
    o.upsert = true;
    o.dram_only = copy;
    Result<AllocGrant> g = store_->Alloc(Caller(1, 0), {"t", key}, value.size(), o);
    EXPECT_TRUE(g.ok());
    std::memcpy(g->data, value.data(), value.size());
    uint64_t gen = 0;
    EXPECT_TRUE(store_->Commit(Caller(1, 0), g->alloc_id, {}, &gen).ok());
    return gen;
  }
  bool Track(const std::string& key, uint64_t local, uint64_t owner_gen, uint64_t sequence) {
    return tracker_->Track("t", key, local, {"a", "ua", owner_gen, sequence});
  }
  bool Held(const std::string& key) { return store_->Exist(Caller(2, 0), {"t", key}).ok(); }

  GlobalIndex index_{64 << 20};
  std::unique_ptr<Store> store_;
  std::unique_ptr<CopyTracker> tracker_;
  uint64_t watermark_ = 0;
};

TEST_F(CopyTrackerTest, ACopyStaysThroughADemotionAndGoesWhenItsOwnerReplacesIt) {
  Install(10, {Change(InventoryDelta::kStored, "k", 5)});
  ASSERT_TRUE(Track("k", Commit("k", "first"), 5, 10));
  EXPECT_EQ(tracker_->Stats().tracked, 1u);
  // The owner moves the value to SSD: the same value, still held.
  Apply({Change(InventoryDelta::kStored, "k", 5, Medium::kSsd),
         Change(InventoryDelta::kRemoved, "k", 5)});
  EXPECT_TRUE(Held("k"));
  // An upsert there: the copy goes with the batch that shows it.
  Apply({Change(InventoryDelta::kRemoved, "k", 5, Medium::kSsd),
         Change(InventoryDelta::kStored, "k", 9)});
  EXPECT_FALSE(Held("k"));
  const CopyStats s = tracker_->Stats();
  EXPECT_EQ(s.tracked, 0u);
  EXPECT_EQ(s.dropped_stale, 1u);
  EXPECT_EQ(s.dropped_lost, 0u);
}

TEST_F(CopyTrackerTest, ACopyGoesWhenItsOwnerRemovesTheKeyOrClearsTheTenant) {
  Install(10, {Change(InventoryDelta::kStored, "k", 5), Change(InventoryDelta::kStored, "m", 6)});
  ASSERT_TRUE(Track("k", Commit("k", "first"), 5, 10));
  ASSERT_TRUE(Track("m", Commit("m", "other"), 6, 10));
  Apply({Change(InventoryDelta::kRemoved, "k", 5)});
  EXPECT_FALSE(Held("k"));
  EXPECT_TRUE(Held("m"));
  InventoryDelta clear;
  clear.kind = InventoryDelta::kCleared;
  clear.tenant = "t";
  Apply({clear});
  EXPECT_FALSE(Held("m"));
  EXPECT_EQ(tracker_->Stats().dropped_stale, 2u);
}

// The owner answered with sequence 15 while its view here is at 10 without
// the key: the view is behind, not proof of removal. The batch that brings
// the value keeps it; the one that removes it drops it.
TEST_F(CopyTrackerTest, AViewThatHasNotReachedThePinYetKeepsTheCopyUntilItShowsMore) {
  Install(10, {});
  ASSERT_TRUE(Track("k", Commit("k", "first"), 12, 15));
  EXPECT_TRUE(Held("k"));
  Apply({Change(InventoryDelta::kStored, "x", 11), Change(InventoryDelta::kStored, "k", 12),
         Change(InventoryDelta::kStored, "y", 13), Change(InventoryDelta::kStored, "z", 14),
         Change(InventoryDelta::kStored, "w", 14)});
  EXPECT_TRUE(Held("k"));
  Apply({Change(InventoryDelta::kRemoved, "k", 12)});
  EXPECT_FALSE(Held("k"));
}

TEST_F(CopyTrackerTest, ACopyTheViewAlreadyShowsReplacedOrRemovedIsDroppedAtOnce) {
  // Replaced: a newer generation, whatever the view's sequence.
  Install(10, {Change(InventoryDelta::kStored, "k", 14)});
  EXPECT_FALSE(Track("k", Commit("k", "first"), 12, 15));
  EXPECT_FALSE(Held("k"));
  // Removed: a view past the pin's sequence without the key.
  Install(20, {});
  EXPECT_FALSE(Track("k", Commit("k", "again"), 16, 18));
  EXPECT_FALSE(Held("k"));
  EXPECT_EQ(tracker_->Stats().dropped_stale, 2u);
  EXPECT_EQ(tracker_->Stats().tracked, 0u);
}

// A get that fetched a value its owner replaced meanwhile may read it once:
// with keep_stale the copy stays (untracked) for its caller to remove.
TEST_F(CopyTrackerTest, AStaleCopyKeptForItsCallerIsNeitherTrackedNorRemoved) {
  Install(10, {Change(InventoryDelta::kStored, "k", 14)});
  const uint64_t local = Commit("k", "first");
  EXPECT_FALSE(tracker_->Track("t", "k", local, {"a", "ua", 12, 15}, /*keep_stale=*/true));
  EXPECT_TRUE(Held("k"));
  EXPECT_EQ(tracker_->Stats().tracked, 0u);
  EXPECT_EQ(tracker_->Stats().dropped_stale, 1u);
  EXPECT_TRUE(store_->admin().RemoveIfAt({"t", "k"}, local).ok());
}

// Without a complete view (a stream that ended cleanly and starts again), a
// copy is kept and judged against the snapshot installed next.
TEST_F(CopyTrackerTest, ACopyMadeWithoutACompleteViewIsJudgedByTheNextSnapshot) {
  Install(10, {Change(InventoryDelta::kStored, "k", 5), Change(InventoryDelta::kStored, "m", 6)});
  index_.MarkPartial("a", true);
  ASSERT_TRUE(Track("k", Commit("k", "first"), 5, 10));
  ASSERT_TRUE(Track("m", Commit("m", "other"), 6, 10));
  Install(30, {Change(InventoryDelta::kStored, "m", 6)});
  EXPECT_FALSE(Held("k"));
  EXPECT_TRUE(Held("m"));
}

TEST_F(CopyTrackerTest, CopiesGoWithAFailedStreamAndWithAnOwnerThatLeftOrRestarted) {
  Install(10, {Change(InventoryDelta::kStored, "k", 5), Change(InventoryDelta::kStored, "m", 6)});
  ASSERT_TRUE(Track("k", Commit("k", "first"), 5, 10));
  tracker_->DropOwner("a");
  EXPECT_FALSE(Held("k"));
  ASSERT_TRUE(Track("m", Commit("m", "other"), 6, 10));
  tracker_->Retain({{"a", "ua"}});
  EXPECT_TRUE(Held("m"));
  tracker_->Retain({{"a", "ua-restarted"}});
  EXPECT_FALSE(Held("m"));
  EXPECT_EQ(tracker_->Stats().dropped_lost, 2u);
  // An incarnation the index no longer expects: nothing to keep it by.
  EXPECT_FALSE(tracker_->Track("t", "n", Commit("n", "third"), {"a", "ua-old", 7, 10}));
  EXPECT_FALSE(Held("n"));
}

// A put here replaces the copy: it is this manager's own value from then on,
// and its owner's later changes leave it alone.
TEST_F(CopyTrackerTest, ALocalPutEndsTheTrackingAndTheOwnersChangesLeaveItAlone) {
  Install(10, {Change(InventoryDelta::kStored, "k", 5)});
  ASSERT_TRUE(Track("k", Commit("k", "first"), 5, 10));
  Commit("k", "mine!", /*copy=*/false);
  EXPECT_EQ(tracker_->Stats().tracked, 0u);
  Apply({Change(InventoryDelta::kRemoved, "k", 5)});
  EXPECT_TRUE(Held("k"));
  EXPECT_EQ(tracker_->Stats().dropped_stale, 0u);
}

}  // namespace
}  // namespace tierkv
