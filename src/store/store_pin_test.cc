// Pins: held replicas survive eviction, removal and upserts until released;
// budgets per owner; exact generations; release-all.
#include "store/store_test_util.h"

namespace tierkv {
namespace {

TEST_F(StoreTest, APinnedReplicaIsNeitherEvictedNorReusedUntilUnpinned) {
  ASSERT_TRUE(Put("k", "pinned", kMiB).ok());
  auto pin =
      store_->pins().Pin(/*owner=*/7, {"default", "k"}, /*generation=*/0, /*budget_bytes=*/0);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(pin->size, kMiB);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(pin->data), 6), "pinned");
  EXPECT_EQ(store_->admin().EvictDownTo(0), 0u);  // the only object is pinned
  ASSERT_TRUE(Put("k", "replaced", kMiB, /*upsert=*/true).ok());
  EXPECT_EQ(Used(), 2 * kMiB);  // the old value is kept for the pin
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(pin->data), 6), "pinned");
  ASSERT_TRUE(store_->Remove({}, {"default", "k"}).ok());
  EXPECT_EQ(store_->pins().Unpin(/*owner=*/8, pin->pin_id).code(), Code::kNotFound);  // not its pin
  EXPECT_EQ(Used(), kMiB);
  EXPECT_TRUE(store_->pins().Unpin(7, pin->pin_id).ok());
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(store_->pins().Unpin(7, pin->pin_id).code(), Code::kNotFound);  // once only
}

TEST_F(StoreTest, PinsAskForAnExactGeneration) {
  ASSERT_TRUE(Put("k", "v1").ok());
  auto first = store_->pins().Pin(1, {"default", "k"}, 0, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(store_->pins().Unpin(1, first->pin_id).ok());
  ASSERT_TRUE(Put("k", "v2", 0, /*upsert=*/true).ok());
  auto stale = store_->pins().Pin(1, {"default", "k"}, first->generation, 0);
  EXPECT_EQ(stale.code(), Code::kNotFound);  // the value changed: a stale index entry fails
  auto fresh = store_->pins().Pin(1, {"default", "k"}, 0, 0);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->generation, first->generation);
  EXPECT_TRUE(store_->pins().Pin(1, {"default", "k"}, fresh->generation, 0).ok());
  EXPECT_EQ(store_->pins().Pin(1, {"default", "missing"}, 0, 0).code(), Code::kNotFound);
}

TEST_F(StoreTest, PinsAreChargedOncePerReplicaToTheirOwnersBudget) {
  ASSERT_TRUE(Put("a", "x", kMiB).ok());
  ASSERT_TRUE(Put("b", "y", kMiB).ok());
  const uint64_t budget = kMiB;  // room for one replica
  auto a1 = store_->pins().Pin(5, {"default", "a"}, 0, budget);
  auto a2 = store_->pins().Pin(5, {"default", "a"}, 0, budget);  // the same replica: no new charge
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(store_->pins().Bytes(5), kMiB);
  EXPECT_EQ(store_->pins().Pin(5, {"default", "b"}, 0, budget).code(), Code::kNoSpace);
  EXPECT_TRUE(store_->pins().Pin(6, {"default", "b"}, 0, budget).ok());  // another owner's budget
  ASSERT_TRUE(store_->pins().Unpin(5, a1->pin_id).ok());
  EXPECT_EQ(store_->pins().Bytes(5), kMiB);  // a2 still holds it
  ASSERT_TRUE(store_->pins().Unpin(5, a2->pin_id).ok());
  EXPECT_EQ(store_->pins().Bytes(5), 0u);
  EXPECT_TRUE(store_->pins().Pin(5, {"default", "b"}, 0, budget).ok());
}

TEST_F(StoreTest, ReleasingAnOwnersPinsLeavesOthersAlone) {
  ASSERT_TRUE(Put("a", "x", kMiB).ok());
  ASSERT_TRUE(Put("b", "y", kMiB).ok());
  ASSERT_TRUE(store_->pins().Pin(1, {"default", "a"}, 0, 0).ok());
  ASSERT_TRUE(store_->pins().Pin(1, {"default", "b"}, 0, 0).ok());
  auto other = store_->pins().Pin(2, {"default", "b"}, 0, 0);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(store_->Remove({}, {"default", "a"}).ok());
  ASSERT_TRUE(store_->Remove({}, {"default", "b"}).ok());
  EXPECT_EQ(Used(), 2 * kMiB);
  EXPECT_EQ(store_->pins().ReleaseAll(1), 2u);  // the owner vanished
  EXPECT_EQ(Used(), kMiB);                      // "b" is still held by owner 2
  EXPECT_EQ(store_->pins().ReleaseAll(1), 0u);
  EXPECT_TRUE(store_->pins().Unpin(2, other->pin_id).ok());
  EXPECT_EQ(Used(), 0u);
}

}  // namespace
}  // namespace tierkv
