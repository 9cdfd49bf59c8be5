// The etcd client, its lease keeper and watcher against real etcd processes
// (one member, or three on loopback), with faults made by killing or pausing
// members and by a TCP fault proxy.
#include "etcd/etcd_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "etcd/lease_keeper.h"
#include "etcd/watcher.h"
#include "etcd_process.h"
#include "fault_proxy.h"
#include "manager_process.h"

namespace tierkv {
namespace {

using testing::EtcdCluster;
using testing::FaultProxy;
using testing::WaitFor;

std::unique_ptr<etcd::Client> Connect(const std::string& endpoints, int64_t timeout_ms = 2000) {
  etcd::ClientOptions o;
  for (size_t at = 0; at <= endpoints.size();) {
    const size_t comma = std::min(endpoints.find(',', at), endpoints.size());
    o.endpoints.push_back(endpoints.substr(at, comma - at));
    at = comma + 1;
  }
  o.call_timeout_ms = timeout_ms;
  auto c = etcd::Client::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

// How many keys a Get finds (-1 when it failed).
int64_t Count(etcd::Client& c, const std::string& key, bool prefix = false) {
  Result<etcd::RangeResult> r = c.Get(key, prefix);
  return r.ok() ? static_cast<int64_t>(r->kvs.size()) : -1;
}

TEST(EtcdClient, KeysTransactionsAndLeasesAgainstARealEtcd) {
  EtcdCluster etcd(1);
  auto c = Connect(etcd.endpoints());
  ASSERT_TRUE(c->Put("/t/a", "1").ok());
  ASSERT_TRUE(c->Put("/t/b", "2").ok());
  auto all = c->Get("/t/", /*prefix=*/true);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->kvs.size(), 2u);
  EXPECT_EQ(all->kvs[1].value, "2");
  EXPECT_GT(all->revision, 0);

  // Create-if-absent: the first transaction wins, the second reads the winner.
  const etcd::Compare absent{"/t/once", etcd::Compare::kCreate, etcd::Compare::kEqual, 0, ""};
  auto first = c->Txn({absent}, {{etcd::Op::kPut, "/t/once", "x", 0, false}},
                      {{etcd::Op::kGet, "/t/once", "", 0, false}});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->succeeded);
  auto second = c->Txn({absent}, {{etcd::Op::kPut, "/t/once", "y", 0, false}},
                       {{etcd::Op::kGet, "/t/once", "", 0, false}});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->gets.size(), 1u);
  ASSERT_EQ(second->gets[0].kvs.size(), 1u);
  EXPECT_EQ(second->gets[0].kvs[0].value, "x");

  // A key bound to a lease goes with it.
  auto lease = c->GrantLease(5);
  ASSERT_TRUE(lease.ok());
  EXPECT_GE(lease->ttl_secs, 5);
  ASSERT_TRUE(c->Put("/t/leased", "v", lease->id).ok());
  EXPECT_EQ(Count(*c, "/t/leased"), 1);
  ASSERT_TRUE(c->RevokeLease(lease->id).ok());
  EXPECT_EQ(Count(*c, "/t/leased"), 0);

  auto deleted = c->Delete("/t/", /*prefix=*/true);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 3);

  // A request over etcd's limit is refused with a clear error, not a hang.
  auto huge = c->Put("/t/huge", std::string(2 << 20, 'x'));
  EXPECT_EQ(huge.status().code(), Code::kTooLarge) << huge.status().ToString();
}

TEST(EtcdClient, CallsFailOverToASurvivingMember) {
  EtcdCluster etcd(3);
  auto c = Connect(etcd.endpoints(), 5000);  // a new raft leader may take a second or two
  ASSERT_TRUE(c->Put("/f/k", "v").ok());
  etcd.Kill(0);  // the endpoint the client uses first
  auto got = c->Get("/f/k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kvs.at(0).value, "v");
  EXPECT_GE(c->Stats().failovers, 1u);
  // A hung member (paused, so its connections stay open) is left on deadline.
  etcd.Restart(0);  // quorum needs two of three
  ASSERT_TRUE(WaitFor([&] { return etcd.Healthy(0); }, 20000));
  // Member 1 must answer before it is paused: right after the restart it may
  // still say "no leader" (UNAVAILABLE), which fails over without a deadline.
  auto only1 = Connect(etcd.client_addr(1), 1000);
  ASSERT_TRUE(WaitFor([&] { return only1->Put("/f/ready", "1").ok(); }, 20000));
  etcd.Pause(1);
  auto c2 = Connect(etcd.client_addr(1) + "," + etcd.client_addr(2), 1000);
  auto put2 = c2->Put("/f/k2", "v2");
  EXPECT_TRUE(put2.ok()) << put2.status().ToString();
  EXPECT_GE(c2->Stats().timeout, 1u);
  etcd.Resume(1);
}

TEST(EtcdClient, NoEndpointAnsweringIsUnavailable) {
  auto c = Connect("127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()), 500);
  auto got = c->Get("/x");
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
  EXPECT_GE(c->Stats().unavailable, 1u);
  EXPECT_FALSE(etcd::Client::Create({{"https://127.0.0.1:1"}, 100, 5000}).ok());
  EXPECT_FALSE(etcd::Client::Create({{"127.0.0.1"}, 100, 5000}).ok());
}

TEST(LeaseKeeper, RenewsOnOneStreamAndReportsALeaseThatIsGone) {
  EtcdCluster etcd(1);
  auto c = Connect(etcd.endpoints());
  auto lease = c->GrantLease(3);
  ASSERT_TRUE(lease.ok());
  std::atomic<int> renewed{0};
  std::atomic<bool> lost{false};
  etcd::LeaseKeeper keeper(c.get(), RealClock());
  keeper.Start(lease->id, lease->ttl_secs,
               {[&](int64_t, int64_t ttl) {
                  if (ttl > 0) renewed++;
                },
                [&] { lost = true; }});
  // Kept past its TTL by the keeper alone.
  ASSERT_TRUE(c->Put("/l/k", "v", lease->id).ok());
  ASSERT_TRUE(WaitFor([&] { return renewed.load() >= 4; }, 10000));
  EXPECT_EQ(Count(*c, "/l/k"), 1);
  EXPECT_FALSE(lost.load());
  ASSERT_TRUE(c->RevokeLease(lease->id).ok());
  EXPECT_TRUE(WaitFor([&] { return lost.load(); }, 5000));
  keeper.Stop();
}

// Membership counts a registration valid for TTL/2 after the send of the last
// acknowledged request. Each renewal must come while at least half of that is
// left (acknowledged sends at most TTL/4 apart), so an etcd outage of a second
// or two never fences a healthy manager.
TEST(LeaseKeeper, RenewsWhileMostOfTheValidityIsLeft) {
  EtcdCluster etcd(1);
  auto c = Connect(etcd.endpoints());
  auto lease = c->GrantLease(8);
  ASSERT_TRUE(lease.ok());
  std::mutex mu;
  std::vector<int64_t> sent;
  etcd::LeaseKeeper keeper(c.get(), RealClock());
  keeper.Start(lease->id, lease->ttl_secs,
               {[&](int64_t at, int64_t) {
                  std::lock_guard<std::mutex> lock(mu);
                  sent.push_back(at);
                },
                [] {}});
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return sent.size() >= 5;
      },
      20000));
  keeper.Stop();
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 1; i < sent.size(); ++i) {
    EXPECT_LE(sent[i] - sent[i - 1], lease->ttl_secs * 1000000000 / 4) << "renewal " << i;
  }
  const auto schedule = etcd::KeepAliveScheduleFor(10);
  EXPECT_EQ(schedule.tick, std::chrono::milliseconds(1000));
  EXPECT_EQ(schedule.reply_timeout, std::chrono::milliseconds(1251));
}

TEST(LeaseKeeper, MovesToAnotherMemberWhenItsMemberHangs) {
  EtcdCluster etcd(3);
  auto c = Connect(etcd.endpoints(), 1000);
  auto lease = c->GrantLease(3);
  ASSERT_TRUE(lease.ok());
  std::atomic<int64_t> last_sent{0};
  std::atomic<bool> lost{false};
  etcd::LeaseKeeper keeper(c.get(), RealClock());
  keeper.Start(lease->id, lease->ttl_secs,
               {[&](int64_t sent, int64_t) { last_sent = sent; }, [&] { lost = true; }});
  ASSERT_TRUE(WaitFor([&] { return last_sent.load() > 0; }));
  etcd.Pause(0);  // the stream's member stops answering
  const int64_t paused_at = RealClock()->NowNanos();
  EXPECT_TRUE(WaitFor([&] { return last_sent.load() > paused_at; }, 6000));
  EXPECT_GE(keeper.renew_failures(), 1u);
  EXPECT_FALSE(lost.load());
  keeper.Stop();
  etcd.Resume(0);
}

// A view of a prefix kept by a Watcher's callbacks.
struct WatchedView {
  std::mutex mu;
  std::map<std::string, std::string> kv;
  int resets = 0;
  etcd::WatchCallbacks Callbacks() {
    return {[this](const std::vector<etcd::KeyValue>& kvs, int64_t) {
              std::lock_guard<std::mutex> lock(mu);
              kv.clear();
              for (const auto& e : kvs) kv[e.key] = e.value;
              ++resets;
            },
            [this](const std::vector<etcd::WatchEvent>& events, int64_t) {
              std::lock_guard<std::mutex> lock(mu);
              for (const auto& e : events) {
                if (e.put) {
                  kv[e.kv.key] = e.kv.value;
                } else {
                  kv.erase(e.kv.key);
                }
              }
            }};
  }
  std::map<std::string, std::string> Copy() {
    std::lock_guard<std::mutex> lock(mu);
    return kv;
  }
};

std::map<std::string, std::string> Truth(etcd::Client& c, const std::string& prefix) {
  std::map<std::string, std::string> out;
  Result<etcd::RangeResult> r = c.Get(prefix, true);
  if (!r.ok()) return out;
  for (const auto& e : r->kvs) out[e.key] = e.value;
  return out;
}

TEST(Watcher, FollowsPutsAndDeletes) {
  EtcdCluster etcd(1);
  auto c = Connect(etcd.endpoints());
  ASSERT_TRUE(c->Put("/w/a", "1").ok());
  WatchedView view;
  etcd::Watcher w(c.get(), "/w/", 0);
  w.Start(view.Callbacks());
  ASSERT_TRUE(WaitFor([&] { return view.Copy().size() == 1; }));
  ASSERT_TRUE(c->Put("/w/b", "2").ok());
  ASSERT_TRUE(c->Delete("/w/a").ok());
  ASSERT_TRUE(c->Put("/other", "x").ok());  // outside the prefix
  const std::map<std::string, std::string> want = {{"/w/b", "2"}};
  EXPECT_TRUE(WaitFor([&] { return view.Copy() == want; })) << view.Copy().size();
  w.Stop();
}

TEST(Watcher, RecoversWhenTheHistoryItNeedsWasCompacted) {
  EtcdCluster etcd(1);
  auto direct = Connect(etcd.endpoints());
  FaultProxy proxy(etcd.client_addr(0));
  auto through = Connect(proxy.addr(), 1000);
  ASSERT_TRUE(direct->Put("/c/a", "1").ok());
  WatchedView view;
  etcd::Watcher w(through.get(), "/c/", /*resync_ms=*/0);  // no re-reads: the watch alone
  w.Start(view.Callbacks());
  ASSERT_TRUE(WaitFor([&] { return view.Copy().size() == 1 && w.connected(); }));
  // Cut the watcher off, change the prefix and compact the history away.
  proxy.SetMode(FaultProxy::Mode::kBlackhole);
  ASSERT_TRUE(direct->Put("/c/b", "2").ok());
  ASSERT_TRUE(direct->Delete("/c/a").ok());
  auto head = direct->Put("/c/c", "3");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(direct->Compact(*head).ok());
  ASSERT_TRUE(direct->Put("/c/d", "4").ok());
  proxy.SetMode(FaultProxy::Mode::kReset);  // the watch stream breaks
  proxy.SetMode(FaultProxy::Mode::kPass);
  EXPECT_TRUE(WaitFor([&] { return view.Copy() == Truth(*direct, "/c/"); }, 15000));
  EXPECT_GE(w.compactions(), 1u);
  EXPECT_EQ(view.Copy().count("/c/a"), 0u);
  w.Stop();
}

TEST(Watcher, PeriodicReReadsRepairAViewThatMissedEvents) {
  EtcdCluster etcd(1);
  auto c = Connect(etcd.endpoints());
  WatchedView view;
  etcd::Watcher w(c.get(), "/r/", /*resync_ms=*/200);
  w.Start(view.Callbacks());
  ASSERT_TRUE(WaitFor([&] { return w.connected(); }));
  {
    // Stand-in for an event the watch lost: the view holds a key etcd never had.
    std::lock_guard<std::mutex> lock(view.mu);
    view.kv["/r/ghost"] = "x";
  }
  ASSERT_TRUE(c->Put("/r/real", "1").ok());
  const std::map<std::string, std::string> want = {{"/r/real", "1"}};
  EXPECT_TRUE(WaitFor([&] { return view.Copy() == want; }, 5000));
  EXPECT_GE(w.resyncs(), 1u);
  w.Stop();
}

}  // namespace
}  // namespace tierkv
