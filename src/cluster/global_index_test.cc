// The global index: owner views, contiguous deltas, absence proof, members
// that leave, and the budget.
#include "cluster/global_index.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <utility>
#include <vector>

namespace tierkv {
namespace {

InventoryDelta Stored(const std::string& key, uint64_t gen, Medium m = Medium::kDram,
                      const std::string& tenant = "t") {
  InventoryDelta d;
  d.kind = InventoryDelta::kStored;
  d.tenant = tenant;
  d.key = key;
  d.medium = m;
  d.size = 10;
  d.generation = gen;
  return d;
}

InventoryDelta Removed(const std::string& key, uint64_t gen, Medium m = Medium::kDram) {
  InventoryDelta d = Stored(key, gen, m);
  d.kind = InventoryDelta::kRemoved;
  return d;
}

TEST(OwnerView, FollowsReplicasAndGenerations) {
  OwnerView v;
  v.Apply(Stored("k", 1));
  v.Apply(Stored("k", 1, Medium::kSsd));
  const RemoteEntry* e = v.Find("t", "k");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->dram && e->ssd);
  v.Apply(Removed("k", 1, Medium::kDram));  // demoted: the SSD replica stays
  e = v.Find("t", "k");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->dram);
  EXPECT_TRUE(e->ssd);
  v.Apply(Stored("k", 2));  // a new value replaces the old one's replicas
  e = v.Find("t", "k");
  EXPECT_TRUE(e->dram && !e->ssd);
  EXPECT_EQ(e->generation, 2u);
  v.Apply(Removed("k", 1, Medium::kSsd));  // late news of the old value: ignored
  EXPECT_NE(v.Find("t", "k"), nullptr);
  v.Apply(Removed("k", 2));
  EXPECT_EQ(v.Find("t", "k"), nullptr);
  EXPECT_EQ(v.size(), 0u);
  EXPECT_EQ(v.Find("other", "k"), nullptr);  // tenants are part of the key
}

TEST(OwnerView, AClearedTenantTakesOnlyItsKeys) {
  OwnerView v;
  for (int i = 0; i < 10; ++i) v.Apply(Stored("k" + std::to_string(i), 1, Medium::kDram, "a"));
  v.Apply(Stored("k0", 1, Medium::kDram, "b"));
  const size_t before = v.bytes();
  InventoryDelta clear;
  clear.kind = InventoryDelta::kCleared;
  clear.tenant = "a";
  v.Apply(clear);
  EXPECT_EQ(v.size(), 1u);
  EXPECT_NE(v.Find("b", "k0"), nullptr);
  // Ten entries' worth less (the interned names stay), and an entry costs
  // well under the 128 bytes an object is allowed.
  OwnerView one;
  one.Apply(Stored("p", 1));
  const size_t first = one.bytes();
  one.Apply(Stored("q", 1));
  const size_t per_entry = one.bytes() - first;
  EXPECT_LT(per_entry, 128u);
  EXPECT_EQ(before - v.bytes(), 10 * per_entry);
}

// A run of changes applied together (windows of prefetched lookups) leaves the
// view exactly as the same changes applied one at a time: stores, removals of
// current and of older values, clears, repeats within a window, names that
// change from one change to the next, and keys too long for the hash's stack
// buffer.
TEST(OwnerView, ChangesAppliedTogetherMatchChangesAppliedOneByOne) {
  std::vector<InventoryDelta> changes;
  std::vector<std::pair<std::string, std::string>> keys;  // (tenant, key)
  uint64_t rng = 7;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
  };
  for (int i = 0; i < 2000; ++i) {
    const std::string tenant = next() % 4 == 0 ? "b" : "a";
    std::string key = "k" + std::to_string(next() % 300);
    if (next() % 50 == 0) key += std::string(400, 'x');
    InventoryDelta d =
        Stored(key, 1 + next() % 3, next() % 3 == 0 ? Medium::kSsd : Medium::kDram, tenant);
    d.name_space = next() % 2 == 0 ? "ns-one" : "";
    const uint64_t roll = next() % 10;
    if (roll < 3) d.kind = InventoryDelta::kRemoved;
    if (roll == 9 && next() % 20 == 0) {
      d.kind = InventoryDelta::kCleared;
      d.key.clear();
    }
    changes.push_back(d);
    keys.emplace_back(tenant, key);
  }
  OwnerView together, one_by_one;
  together.ApplyAll(changes);
  for (const InventoryDelta& d : changes) one_by_one.Apply(d);
  ASSERT_EQ(together.size(), one_by_one.size());
  EXPECT_GT(together.size(), 50u);
  EXPECT_EQ(together.bytes(), one_by_one.bytes());
  for (const auto& [tenant, key] : keys) {
    const RemoteEntry* a = together.Find(tenant, key);
    const RemoteEntry* b = one_by_one.Find(tenant, key);
    ASSERT_EQ(a == nullptr, b == nullptr) << tenant << "/" << key;
    if (a == nullptr) continue;
    EXPECT_EQ(a->generation, b->generation);
    EXPECT_EQ(a->dram, b->dram);
    EXPECT_EQ(a->ssd, b->ssd);
    EXPECT_EQ(together.Name(a->tenant), tenant);
    EXPECT_EQ(together.Name(a->name_space), one_by_one.Name(b->name_space));
  }
}

TEST(OwnerView, NamesInternedInTurnStayApart) {
  OwnerView v;
  for (int i = 0; i < 6; ++i) {
    InventoryDelta d = Stored("k" + std::to_string(i), 1, Medium::kDram, i % 2 ? "odd" : "even");
    d.name_space = i % 3 == 0 ? "ns" : "";
    v.Apply(d);
  }
  for (int i = 0; i < 6; ++i) {
    const RemoteEntry* e = v.Find(i % 2 ? "odd" : "even", "k" + std::to_string(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(v.Name(e->tenant), i % 2 ? "odd" : "even");
    EXPECT_EQ(v.Name(e->name_space), i % 3 == 0 ? "ns" : "");
  }
}

TEST(GlobalIndex, InstallsWholeViewsAndProvesAbsenceOnlyWhenAllAreComplete) {
  GlobalIndex index(1 << 20);
  index.SetExpected({{"a", {"ua", 1}}, {"b", {"ub", 2}}});
  EXPECT_FALSE(index.Lookup("t", "x").absence_proved);  // no views yet
  EXPECT_EQ(index.Lookup("t", "x").incomplete_owner, "a");
  auto va = std::make_unique<OwnerView>();
  va->Apply(Stored("x", 7));
  index.BeginStaging();
  ASSERT_TRUE(index.ReserveStaging(va->bytes()));
  index.Install("a", "ua", std::move(va), /*watermark=*/5, /*staged=*/0);
  IndexLookup x = index.Lookup("t", "x");
  ASSERT_EQ(x.locations.size(), 1u);
  EXPECT_EQ(x.locations[0].owner, "a");
  EXPECT_EQ(x.locations[0].rank, 1u);
  EXPECT_TRUE(x.locations[0].complete);
  EXPECT_FALSE(index.Lookup("t", "y").absence_proved);  // b's view is missing
  index.BeginStaging();
  index.Install("b", "ub", std::make_unique<OwnerView>(), 3, 0);
  EXPECT_TRUE(index.Lookup("t", "y").absence_proved);
  // Deltas must continue exactly where the view stands.
  EXPECT_FALSE(index.ApplyDeltas("a", 7, 8, {Stored("y", 9)}));  // a gap
  EXPECT_TRUE(index.ApplyDeltas("a", 6, 8, {Stored("y", 9)}));
  EXPECT_EQ(index.Seen({"a"}).covered, 8u);
  EXPECT_EQ(index.Lookup("t", "y").locations.size(), 1u);
  // A broken stream keeps hints; a departed member is forgotten at once.
  index.MarkPartial("a", true);
  IndexLookup hint = index.Lookup("t", "x");
  ASSERT_EQ(hint.locations.size(), 1u);
  EXPECT_FALSE(hint.locations[0].complete);
  EXPECT_FALSE(index.Lookup("t", "zzz").absence_proved);
  index.SetExpected({{"b", {"ub", 2}}});
  EXPECT_TRUE(index.Lookup("t", "x").locations.empty());
  EXPECT_TRUE(index.Lookup("t", "x").absence_proved);
  // A restarted owner (new runtime) is a new, empty expectation.
  index.SetExpected({{"b", {"ub-2", 2}}});
  EXPECT_FALSE(index.Lookup("t", "x").absence_proved);
  index.BeginStaging();
  index.Install("b", "ub", std::make_unique<OwnerView>(), 3, 0);  // the old one's: ignored
  EXPECT_EQ(index.Stats().complete, 0u);
}

// A fence wait counts only a view of the fence's incarnation, and ends at
// once for an incarnation that has left the membership. (The deadlines are
// far off: a wait that did not end at once would end with what it saw, and
// the checks of what it saw would fail.)
TEST(GlobalIndex, AFenceWaitCountsOnlyItsIncarnationAndEndsAtOnceForARetiredOne) {
  GlobalIndex index(1 << 20);
  const auto later = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(60); };
  index.SetExpected({{"a", {"ua", 1}}});
  index.BeginStaging();
  index.Install("a", "ua", std::make_unique<OwnerView>(), /*watermark=*/50, /*staged=*/0);
  FenceSeen seen = index.AwaitFence({"a", "ua"}, 40, later());
  EXPECT_EQ(seen.covered, 50u);
  EXPECT_EQ(seen.view_uuid, "ua");
  EXPECT_FALSE(seen.retired);
  EXPECT_EQ(index.AwaitFence({"a", ""}, 40, later()).covered, 50u);  // no incarnation named
  // a restarts: its old incarnation's fences end at once, whatever the new
  // view's watermark.
  index.SetExpected({{"a", {"ua-2", 1}}});
  index.BeginStaging();
  index.Install("a", "ua-2", std::make_unique<OwnerView>(), 80, 0);
  seen = index.AwaitFence({"a", "ua"}, 40, later());
  EXPECT_TRUE(seen.retired);
  EXPECT_EQ(seen.covered, 0u);  // the new view does not cover the old fence
  EXPECT_EQ(seen.view_uuid, "ua-2");
  EXPECT_NE(FenceOutcome({"a", "ua"}, 40, seen).message().find("stale fence"), std::string::npos);
  // A fence of an incarnation not seen yet is not covered by another's view.
  seen = index.AwaitFence({"a", "ua-3"}, 40, std::chrono::steady_clock::now());
  EXPECT_FALSE(seen.retired);
  EXPECT_EQ(seen.covered, 0u);
  EXPECT_NE(FenceOutcome({"a", "ua-3"}, 40, seen).message().find("timeout"), std::string::npos);
  EXPECT_TRUE(FenceOutcome({"a", "ua-2"}, 80, index.AwaitFence({"a", "ua-2"}, 80, later())).ok());
  // An owner that left: unknown at once.
  index.SetExpected({});
  seen = index.AwaitFence({"a", "ua-2"}, 1, later());
  EXPECT_FALSE(seen.covered.has_value());
  EXPECT_NE(FenceOutcome({"a", "ua-2"}, 1, seen).message().find("unknown owner"),
            std::string::npos);
}

// Even a fence of sequence 0 (its owner had no changes yet) is covered only
// by a complete view of its incarnation: before one is installed, its wait
// goes on, and ends with a timeout that says what is missing.
TEST(GlobalIndex, AFenceOfSequenceZeroWaitsForACompleteViewOfItsIncarnation) {
  GlobalIndex index(1 << 20);
  const auto now = [] { return std::chrono::steady_clock::now(); };
  index.SetExpected({{"a", {"ua-1", 1, 1}}});
  index.BeginStaging();
  index.Install("a", "ua-1", std::make_unique<OwnerView>(), 5, 0);
  // a restarts with the same epoch number seen here; the view is still ua-1's.
  FenceSeen seen = index.AwaitFence({"a", "ua-2", 1}, 0, now());
  EXPECT_FALSE(seen.current);
  EXPECT_FALSE(seen.Settled(0));
  std::string why = FenceOutcome({"a", "ua-2", 1}, 0, seen).message();
  EXPECT_NE(why.find("timeout: the view of a here is of runtime ua-1, not of runtime ua-2"),
            std::string::npos)
      << why;
  // The new incarnation expected, its view not yet complete.
  index.SetExpected({{"a", {"ua-2", 1, 1}}});
  for (const FenceOwner& f : {FenceOwner{"a", "ua-2", 1}, FenceOwner{"a", "", 0}}) {
    seen = index.AwaitFence(f, 0, now());
    EXPECT_TRUE(seen.covered.has_value());
    EXPECT_FALSE(seen.current);
    why = FenceOutcome(f, 0, seen).message();
    EXPECT_NE(why.find("timeout: there is no complete view of a here yet"), std::string::npos)
        << why;
  }
  // A wait with time left ends with the install, covered.
  auto waiter = std::async(std::launch::async, [&] {
    return index.AwaitFence({"a", "ua-2", 1}, 0, now() + std::chrono::seconds(60));
  });
  index.BeginStaging();
  index.Install("a", "ua-2", std::make_unique<OwnerView>(), 0, 0);
  seen = waiter.get();
  EXPECT_TRUE(seen.current);
  EXPECT_EQ(seen.view_uuid, "ua-2");
  EXPECT_TRUE(FenceOutcome({"a", "ua-2", 1}, 0, seen).ok());
}

// A fence that names its epoch ends at once when the member list here has
// shown a later epoch of its node, even for an incarnation whose UUID was
// never seen here (the owner restarted twice between two looks), and waits
// for one of a later epoch than any seen (the member list may lag).
TEST(GlobalIndex, AFenceOfAnEarlierEpochEndsAtOnceEvenForAnIncarnationNeverSeen) {
  GlobalIndex index(1 << 20);
  const auto later = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(60); };
  index.SetExpected({{"a", {"ua-1", 1, /*epoch=*/1}}});
  index.BeginStaging();
  index.Install("a", "ua-1", std::make_unique<OwnerView>(), 50, 0);
  EXPECT_TRUE(
      FenceOutcome({"a", "ua-1", 1}, 40, index.AwaitFence({"a", "ua-1", 1}, 40, later())).ok());
  // a restarts twice; this manager sees only the third incarnation.
  index.SetExpected({{"a", {"ua-3", 1, 3}}});
  index.BeginStaging();
  index.Install("a", "ua-3", std::make_unique<OwnerView>(), 90, 0);
  const FenceOwner second{"a", "ua-2", 2};  // never seen here
  FenceSeen seen = index.AwaitFence(second, 40, later());
  EXPECT_TRUE(seen.retired);
  EXPECT_EQ(seen.epoch, 3u);
  EXPECT_EQ(seen.covered, 0u);
  const std::string stale = FenceOutcome(second, 40, seen).message();
  EXPECT_NE(stale.find("stale fence: runtime ua-2 of a"), std::string::npos) << stale;
  EXPECT_NE(stale.find("a now runs epoch 3"), std::string::npos) << stale;
  // Without the epoch the same fence can only wait.
  seen = index.AwaitFence({"a", "ua-2"}, 40, std::chrono::steady_clock::now());
  EXPECT_FALSE(seen.retired);
  // A fence naming only an earlier epoch is stale as well.
  seen = index.AwaitFence({"a", "", 2}, 40, later());
  EXPECT_TRUE(seen.retired);
  EXPECT_NE(FenceOutcome({"a", "", 2}, 40, seen).message().find("stale fence: epoch 2 of a"),
            std::string::npos);
  // A later epoch than any seen waits for the member list.
  seen = index.AwaitFence({"a", "ua-4", 4}, 40, std::chrono::steady_clock::now());
  EXPECT_FALSE(seen.retired);
  // The newest epoch is kept after the node leaves: its old fences stay stale.
  index.SetExpected({});
  EXPECT_TRUE(index.Seen({"a", "ua-2", 2}).retired);
  EXPECT_FALSE(index.Seen({"a", "ua-2", 2}).covered.has_value());
}

TEST(GlobalIndex, TheBudgetRefusesStagingThatWouldNotFit) {
  GlobalIndex index(1000);
  index.SetExpected({{"a", {"ua", 0}}});
  index.BeginStaging();
  EXPECT_TRUE(index.ReserveStaging(600));
  EXPECT_FALSE(index.ReserveStaging(600));
  index.AbandonStaging(600, /*over_budget=*/true);
  const IndexStats s = index.Stats();
  EXPECT_EQ(s.refused_budget, 1u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.staging, 0u);
  EXPECT_EQ(s.missing, 1u);
}

}  // namespace
}  // namespace tierkv
