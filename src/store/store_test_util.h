// Test helpers for the store: a manual-clock store over a small pool, and an
// observer that records announcements as text.
#ifndef TIERKV_STORE_STORE_TEST_UTIL_H_
#define TIERKV_STORE_STORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/store.h"

namespace tierkv {

class RecordingObserver : public ReplicaObserver {
 public:
  void OnStored(const ReplicaEvent& e) override {
    Add("stored " + std::string(e.tenant) + "/" + std::string(e.key) + " " +
        std::string(MediumName(e.medium)));
  }
  void OnRemoved(const ReplicaEvent& e) override {
    static const char* kCause[] = {"removed", "replaced", "evicted", "demoted"};
    Add(std::string(kCause[static_cast<int>(e.cause)]) + " " + std::string(e.tenant) + "/" +
        std::string(e.key) + " " + std::string(MediumName(e.medium)));
  }
  void OnTenantCleared(std::string_view tenant) override { Add("cleared " + std::string(tenant)); }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }

 private:
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

class StoreTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kMiB = 1 << 20;

  void Make(uint64_t pool_bytes = 16 * kMiB, StoreOptions opts = {}) {
    opts.clock = &clock_;
    auto pool = DramPool::Create(pool_bytes);
    ASSERT_TRUE(pool.ok());
    dram_ = pool->get();
    auto store = Store::Create(opts, std::move(*pool));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    store_->AddObserver(&observer_);
  }
  void SetUp() override { Make(); }

  // Full put: alloc, write `value` (repeated to `size`), commit.
  Status Put(std::string_view key, std::string_view value, uint64_t size = 0, bool upsert = false,
             std::string_view tenant = "default", uint64_t session = 0) {
    if (size == 0) size = value.size();
    auto g = store_->Alloc({session, 0}, {tenant, key}, size, {"", upsert});
    if (!g.ok()) return g.status();
    uint8_t* dst = dram().base() + g->offset;
    for (uint64_t i = 0; i < size; ++i) dst[i] = static_cast<uint8_t>(value[i % value.size()]);
    return store_->Commit({session, 0}, g->alloc_id);
  }
  // Full get: lease, copy, release.
  Result<std::string> Get(std::string_view key, std::string_view tenant = "default") {
    auto l = store_->Lease({}, {tenant, key});
    if (!l.ok()) return l.status();
    std::string out(reinterpret_cast<const char*>(dram().base() + l->offset), l->size);
    if (Status st = store_->Release({}, l->lease_id); !st.ok()) return st;
    return out;
  }
  uint64_t Used() { return dram().Stats().allocated; }

  // The store's pool, written and read directly by the tests (everyone else
  // goes through grants, leases and pins).
  DramPool& dram() { return *dram_; }

  ManualClock clock_;
  RecordingObserver observer_;
  DramPool* dram_ = nullptr;  // owned by store_
  std::unique_ptr<Store> store_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_TEST_UTIL_H_
