// Reads through copies, with real etcd and real managers: a copy fetched by
// another manager follows its owner's upserts and removals; readers on that
// manager, while the owner upserts a key over and over, never see a version
// older than one they already saw there and never miss the key; and the
// copies of an owner cut off by a partition go within the stall bound.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cluster_util.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::ScrapeMetric;
using testing::WaitFor;

// A value that names its version, padded so that it is not tiny.
std::string Versioned(int v) {
  std::string s = "v" + std::to_string(v) + ":";
  s.resize(4096, static_cast<char>('a' + v % 26));
  return s;
}
int VersionOf(const std::string& s) { return std::stoi(s.substr(1, s.find(':') - 1)); }

TEST(CopyConsistency, ACopyFollowsItsOwnersUpsertAndRemove) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto ca = Client::Connect(a.proc->uds());
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_TRUE((*ca)->Put("k", Versioned(1)).ok());
  ASSERT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("k");
    return v.ok() && *v == Versioned(1);
  }));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_copies"), 1);
  // b serves its copy locally now; once a's upsert reaches b's view of a,
  // the copy goes and b reads the new value.
  ASSERT_TRUE((*ca)->Upsert("k", Versioned(2)).ok());
  EXPECT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("k");
    return v.ok() && *v == Versioned(2);
  }));
  EXPECT_GE(ScrapeMetric(*b.proc, "tierkv_remote_copies_dropped_total{reason=\"stale\"}"), 1);
  ASSERT_TRUE((*ca)->Remove("k").ok());
  EXPECT_TRUE(WaitFor([&] { return (*cb)->Get("k").status().code() == Code::kNotFound; }));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_copies"), 0);
}

// The owner upserts one key 300 times while two readers on the other manager
// read it without pause: each reader's versions never go back and the key
// never misses (a stale refusal is asked again of the owner); at the end both
// managers serve the last version.
TEST(CopyConsistency, ReadersOnAnotherManagerNeverGoBackAndNeverMissUnderUpserts) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a");
  Node b = StartNode(etcd.endpoints(), cluster, "b");
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE((*ca)->Put("hot", Versioned(0)).ok());
  {
    auto cb = Client::Connect(b.proc->uds());
    ASSERT_TRUE(cb.ok());
    ASSERT_TRUE(WaitFor([&] { return (*cb)->Get("hot").ok(); }));
  }
  constexpr int kVersions = 300;
  std::atomic<bool> done{false};
  struct Seen {
    int reads = 0, misses = 0, backwards = 0, last = -1, highest = -1;
    std::string first_error;
  };
  std::vector<Seen> seen(2);
  std::vector<std::thread> readers;
  for (Seen& s : seen) {
    readers.emplace_back([&, &s = s] {
      auto c = Client::Connect(b.proc->uds());
      if (!c.ok()) {
        s.first_error = c.status().ToString();
        return;
      }
      while (!done.load()) {
        Result<std::string> v = (*c)->Get("hot");
        ++s.reads;
        if (!v.ok()) {
          ++s.misses;
          if (s.first_error.empty()) s.first_error = v.status().ToString();
          continue;
        }
        const int version = VersionOf(*v);
        if (*v != Versioned(version)) s.first_error = "wrong bytes for version " + *v;
        if (version < s.highest) ++s.backwards;
        s.highest = std::max(s.highest, version);
        s.last = version;
      }
    });
  }
  for (int v = 1; v <= kVersions; ++v) {
    ASSERT_TRUE((*ca)->Upsert("hot", Versioned(v)).ok()) << v;
  }
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  EXPECT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("hot");
    return v.ok() && *v == Versioned(kVersions);
  }));
  done.store(true);
  for (std::thread& t : readers) t.join();
  for (const Seen& s : seen) {
    EXPECT_GT(s.reads, 0);
    EXPECT_EQ(s.misses, 0) << s.first_error;
    EXPECT_EQ(s.backwards, 0);
    EXPECT_TRUE(s.first_error.empty()) << s.first_error;
  }
}

// A partition that drops a's peer traffic without closing anything: within
// --inventory-stall-ms of a's last frame b drops its copies of a's values
// (a could be changing them unseen); once the partition heals, b reads a's
// current value again.
TEST(CopyConsistency, CopiesOfAnOwnerCutOffForTheStallBoundAreDropped) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  ProxiedNode pa = StartBehindProxy(etcd.endpoints(), cluster, "a");
  std::unique_ptr<ManagerProcess>& a = pa.proc;
  testing::FaultProxy& proxy = *pa.proxy;
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--inventory-stall-ms", "2000"});
  auto ca = Client::Connect(a->uds());
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_TRUE((*ca)->Put("k", Versioned(1)).ok());
  ASSERT_TRUE(WaitFor([&] { return (*cb)->Get("k").ok(); }));
  LookupOptions local;
  local.local_only = true;
  ASSERT_TRUE((*cb)->Exist("k", kDefaultTenant, local).ok());

  proxy.SetMode(testing::FaultProxy::Mode::kBlackhole);
  ASSERT_TRUE((*ca)->Upsert("k", Versioned(2)).ok());  // unseen by b
  EXPECT_TRUE(WaitFor([&] { return ScrapeMetric(*b.proc, "tierkv_remote_copies") == 0; }));
  EXPECT_FALSE((*cb)->Exist("k", kDefaultTenant, local).ok());
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_copies_dropped_total{reason=\"owner_lost\"}"), 1);

  proxy.SetMode(testing::FaultProxy::Mode::kPass);
  EXPECT_TRUE(WaitFor([&] {
    Result<std::string> v = (*cb)->Get("k");
    return v.ok() && *v == Versioned(2);
  }));
}

}  // namespace
}  // namespace tierkv
