#include "cluster/grant_releaser.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "wait_for.h"

namespace tierkv {
namespace {

struct Sent {
  std::mutex mu;
  std::vector<uint64_t> tickets;
  void Add(const PendingRelease& r) {
    std::lock_guard lock(mu);
    tickets.push_back(r.ticket);
  }
  std::vector<uint64_t> Get() {
    std::lock_guard lock(mu);
    return tickets;
  }
};

TEST(GrantReleaserTest, AReleaseNobodyCarriesIsSentAloneOnceItsLingerPassed) {
  Sent sent;
  GrantReleaser r([&](const PendingRelease& p) { sent.Add(p); }, std::chrono::milliseconds(2));
  auto peer = std::make_shared<FetchPeer>();
  ASSERT_TRUE(r.Queue({peer, 7, false, {}}));
  ASSERT_TRUE(testing::WaitFor([&] { return sent.Get().size() == 1; }));
  EXPECT_EQ(sent.Get(), std::vector<uint64_t>{7});
  EXPECT_EQ(r.queued(), 0u);
}

TEST(GrantReleaserTest, AnAuthorizationCarriesOnlyItsOwnersReleasesAndGivesBackWhatItCouldNot) {
  Sent sent;
  // A linger far beyond the test: nothing is sent alone while it runs.
  auto r = std::make_unique<GrantReleaser>([&](const PendingRelease& p) { sent.Add(p); },
                                           std::chrono::minutes(10));
  auto a = std::make_shared<FetchPeer>();
  auto b = std::make_shared<FetchPeer>();
  ASSERT_TRUE(r->Queue({a, 1, false, {}}));
  ASSERT_TRUE(r->Queue({b, 2, false, {}}));
  ASSERT_TRUE(r->Queue({a, 3, false, {}}));
  ASSERT_TRUE(r->Queue({a, 4, false, {}}));
  std::vector<PendingRelease> taken = r->TakeFor(*a, 2);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].ticket, 1u);
  EXPECT_EQ(taken[1].ticket, 3u);
  EXPECT_EQ(r->queued(), 2u);
  r->Return(std::move(taken));  // the owner did not answer: they go first
  EXPECT_EQ(r->queued(), 4u);
  EXPECT_TRUE(sent.Get().empty());
  r.reset();  // sends every queued release, oldest returned first
  EXPECT_EQ(sent.Get(), (std::vector<uint64_t>{1, 3, 2, 4}));
}

}  // namespace
}  // namespace tierkv
