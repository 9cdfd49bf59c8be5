// S3-FIFO eviction (StoreOptions::evict_policy): new objects are on probation,
// an object read on probation survives its first eviction turn, a scan of new
// objects does not push out the ones being read, and a probation victim that
// comes back soon is admitted to the main queue.
#include "store/store_test_util.h"

namespace tierkv {
namespace {

std::string Key(const std::string& p, int i) { return p + std::to_string(i); }

class S3FifoTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.shards = 1;  // one queue pair: the order is exact
    o.evict_policy = EvictPolicy::kS3Fifo;
    Make(16 * kMiB, o);
  }
  bool There(const std::string& key) { return store_->Exist({}, {"default", key}).ok(); }
  void PutOne(const std::string& key) {
    ASSERT_TRUE(Put(key, "v", kMiB).ok()) << key;
    clock_.AdvanceMillis(1);
  }
};

TEST_F(S3FifoTest, AScanOfNewObjectsLeavesTheObjectsBeingReadInPlace) {
  for (int i = 0; i < 8; ++i) PutOne(Key("hot", i));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Get(Key("hot", i)).ok());  // read on probation
  // A scan of 30 one-off objects through a pool of 16: the hot ones move to
  // the main queue at their first turn; the scan's objects are the victims.
  for (int i = 0; i < 30; ++i) PutOne(Key("scan", i));
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(There(Key("hot", i))) << i;
  int scan_left = 0;
  for (int i = 0; i < 30; ++i) scan_left += There(Key("scan", i)) ? 1 : 0;
  EXPECT_LT(scan_left, 16);
  EXPECT_GT(store_->admin().Stats().evicted_objects, 14u);
}

TEST_F(S3FifoTest, UnreadObjectsLeaveInTheOrderTheyCame) {
  for (int i = 0; i < 16; ++i) PutOne(Key("k", i));  // the pool is full
  observer_.Take();
  PutOne("more-1");
  PutOne("more-2");
  const std::vector<std::string> ev = observer_.Take();
  std::vector<std::string> evicted;
  for (const std::string& e : ev) {
    if (e.rfind("evicted", 0) == 0) evicted.push_back(e);
  }
  ASSERT_GE(evicted.size(), 2u);
  EXPECT_EQ(evicted[0], "evicted default/k0 dram");
  EXPECT_EQ(evicted[1], "evicted default/k1 dram");
}

TEST_F(S3FifoTest, AProbationVictimThatComesBackEntersTheMainQueue) {
  for (int i = 0; i < 16; ++i) PutOne(Key("k", i));  // the pool is full
  PutOne("x");  // evicts k0 from probation: its hash goes to the ghost
  ASSERT_FALSE(There("k0"));
  PutOne("k0");  // back soon: admitted to main, not probation
  // A burst of a pool's worth of new objects drains probation; k0, in main,
  // outlives it (under LRU it would be gone: every burst object is newer).
  for (int i = 0; i < 16; ++i) PutOne(Key("burst", i));
  EXPECT_TRUE(There("k0"));
  EXPECT_FALSE(There("k1"));
}

TEST_F(S3FifoTest, LeasedObjectsAreSkippedNotEvicted) {
  for (int i = 0; i < 16; ++i) PutOne(Key("k", i));  // the pool is full
  Result<LeaseGrant> held = store_->Lease(Caller(9, 0), {"default", "k0"});
  ASSERT_TRUE(held.ok());
  PutOne("y");
  PutOne("z");
  EXPECT_TRUE(There("k0"));  // leased: passed over
  EXPECT_TRUE(store_->Release(Caller(9, 0), held->lease_id).ok());
}

}  // namespace
}  // namespace tierkv
