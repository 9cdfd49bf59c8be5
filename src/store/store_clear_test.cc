// RemoveAll is linearizable with concurrent puts: a subscriber that applies the
// announcements in the order it receives them always ends with exactly the
// store's contents, and never sees `cleared` while it still knows a live object
// of the tenant (which it would then drop although it exists).
#include <atomic>
#include <set>
#include <thread>
#include <tuple>

#include "store/store_test_util.h"

namespace tierkv {
namespace {

// Keeps the set of (tenant, key, medium) the way a KV event subscriber does.
class MirrorObserver : public ReplicaObserver {
 public:
  using Replica = std::tuple<std::string, std::string, Medium>;
  void OnStored(const ReplicaEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    set_.emplace(std::string(e.tenant), std::string(e.key), e.medium);
  }
  void OnRemoved(const ReplicaEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (set_.erase({std::string(e.tenant), std::string(e.key), e.medium}) == 0) ++unknown_removed_;
  }
  // Every object of the tenant was announced removed before: nothing is left to drop.
  void OnTenantCleared(std::string_view tenant) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++cleared_;
    for (auto it = set_.begin(); it != set_.end();) {
      if (std::get<0>(*it) == tenant) {
        ++dropped_live_;
        it = set_.erase(it);
      } else {
        ++it;
      }
    }
  }
  int dropped_live() {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_live_;
  }
  int unknown_removed() {
    std::lock_guard<std::mutex> lock(mu_);
    return unknown_removed_;
  }
  std::set<Replica> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }
  int cleared() {
    std::lock_guard<std::mutex> lock(mu_);
    return cleared_;
  }

 private:
  std::mutex mu_;
  std::set<Replica> set_;
  int cleared_ = 0;
  int dropped_live_ = 0;     // objects still known at `cleared`
  int unknown_removed_ = 0;  // `removed` of an object not known
};

TEST(StoreClear, RemoveAllRacingPutsLeavesTheSubscribersViewEqualToTheStore) {
  MirrorObserver mirror;
  StoreOptions o;
  o.shards = 64;
  auto pool = DramPool::Create(64 << 20);
  ASSERT_TRUE(pool.ok());
  auto created = Store::Create(o, std::move(*pool));
  ASSERT_TRUE(created.ok());
  std::unique_ptr<Store> store = std::move(*created);
  store->AddObserver(&mirror);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&, w] {
      for (uint64_t i = 0; !stop.load(); ++i) {
        const std::string key = "w" + std::to_string(w) + "/" + std::to_string(i % 512);
        auto g = store->Alloc({}, {"t", key}, 64, {"", /*upsert=*/true});
        if (g.ok() && store->Commit({}, g->alloc_id).ok()) puts.fetch_add(1);
      }
    });
  }
  int cleared = 0;
  for (int round = 0; round < 300; ++round) {
    // Something was put since the last round and is still there, so this one
    // has work to race with (a put counted after it committed may have been
    // swept by the previous round already).
    const uint64_t seen = puts.load();
    while (puts.load() == seen || store->admin().Stats().objects == 0) std::this_thread::yield();
    auto r = store->RemoveAll({}, "t", /*force=*/true);
    ASSERT_TRUE(r.ok());
    cleared += r->cleared ? 1 : 0;
  }
  stop = true;
  for (auto& t : writers) t.join();
  std::set<MirrorObserver::Replica> actual;
  store->admin().ForEachReadable([&](const ReplicaEvent& e) {
    actual.emplace(std::string(e.tenant), std::string(e.key), e.medium);
  });
  EXPECT_EQ(cleared, 300);  // every round found something to remove
  EXPECT_EQ(mirror.cleared(), cleared);
  EXPECT_EQ(mirror.dropped_live(), 0);
  EXPECT_EQ(mirror.unknown_removed(), 0);
  EXPECT_EQ(mirror.Take(), actual);
}

}  // namespace
}  // namespace tierkv
