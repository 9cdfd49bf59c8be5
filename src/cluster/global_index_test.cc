// The global index: owner views, contiguous deltas, absence proof, members
// that leave, and the budget.
#include "cluster/global_index.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(index.Watermark("a"), 8u);
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
