// The busy-poll back-off's rule, on explicit times, and ReadFull's spin path
// against a writer in pieces and a closed peer.

#include "protocol/socket_io.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace tierkv::proto {
namespace {

using std::chrono::microseconds;
using Clock = SpinBackoff::Clock;

constexpr Clock::duration kLate = std::chrono::milliseconds(4);  // one scheduler tick

// Late yields of `kLate` at once until a quiet period starts; its length.
Clock::duration QuietAfterLateYields(SpinBackoff& b, Clock::time_point* t) {
  for (int i = 0; i < 100; ++i) {
    *t += kLate;
    const Clock::duration q = b.OnLateYield(*t, kLate);
    if (q.count() > 0) return q;
  }
  return Clock::duration::zero();
}

TEST(WaitAverage, AnAverageWithAStartTakesAQuarterOfEachWait) {
  WaitAverage gap(0);  // as a manager's session starts
  EXPECT_EQ(gap.PollUs(400), WaitAverage::kMarginUs);
  gap.Record(80);
  EXPECT_EQ(gap.average_us(), 20);
  EXPECT_EQ(gap.PollUs(400), 2 * 20 + WaitAverage::kMarginUs);
  gap.Record(3'600'000'000LL);  // an hour counts as a second
  EXPECT_EQ(gap.average_us(), (3 * 20 + 1'000'000) / 4);
  EXPECT_EQ(gap.PollUs(400), 0);
}

TEST(WaitAverage, WithoutAStartTheFirstWaitIsTheAverage) {
  WaitAverage reply;
  EXPECT_EQ(reply.PollUs(400, 50), 50);
  EXPECT_EQ(reply.PollUs(30, 50), 30);
  reply.Record(100);
  EXPECT_EQ(reply.average_us(), 100);
  EXPECT_EQ(reply.PollUs(400, 50), 220);
  EXPECT_EQ(reply.PollUs(150), 150);  // capped
  EXPECT_EQ(reply.PollUs(100), 0);    // an average at the cap is slept
  EXPECT_EQ(reply.PollUs(0), 0);
}

TEST(SpinBackoff, AnOccasionalLateYieldIsTolerated) {
  SpinBackoff b;
  Clock::time_point t = Clock::now();
  // One late yield per window, each below the budget: never a quiet period.
  for (int i = 0; i < 50; ++i) {
    t += SpinBackoff::kWindow + microseconds(1);
    EXPECT_EQ(b.OnLateYield(t, kLate), Clock::duration::zero()) << i;
    EXPECT_TRUE(b.MaySpin(t));
  }
}

TEST(SpinBackoff, LateYieldsCostingMoreThanTheBudgetStartAQuietPeriod) {
  SpinBackoff b;
  Clock::time_point t = Clock::now();
  int late = 0;
  Clock::duration q{0};
  while (q.count() == 0 && late < 100) {
    t += kLate;
    q = b.OnLateYield(t, kLate);
    ++late;
  }
  EXPECT_EQ(q, SpinBackoff::kFirstQuiet);
  EXPECT_EQ(late, SpinBackoff::kLostBudget / kLate + 1);  // the one that passed the budget
  EXPECT_FALSE(b.MaySpin(t));
  EXPECT_FALSE(b.MaySpin(t + SpinBackoff::kFirstQuiet - microseconds(1)));
  EXPECT_TRUE(b.MaySpin(t + SpinBackoff::kFirstQuiet));
}

TEST(SpinBackoff, ContentionThatGoesOnDoublesTheQuietPeriodUpToItsCeiling) {
  SpinBackoff b;
  Clock::time_point t = Clock::now();
  Clock::duration expect = SpinBackoff::kFirstQuiet;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(QuietAfterLateYields(b, &t), expect) << "quiet period " << i;
    t += expect;  // contention again right after it ends
    expect = std::min<Clock::duration>(SpinBackoff::kMaxQuiet, 2 * expect);
  }
  EXPECT_EQ(expect, SpinBackoff::kMaxQuiet);
}

TEST(SpinBackoff, AfterLongCalmTheQuietPeriodStartsOverFromTheFirstLength) {
  SpinBackoff b;
  Clock::time_point t = Clock::now();
  EXPECT_EQ(QuietAfterLateYields(b, &t), SpinBackoff::kFirstQuiet);
  t += SpinBackoff::kFirstQuiet;
  EXPECT_EQ(QuietAfterLateYields(b, &t), 2 * SpinBackoff::kFirstQuiet);
  t += 2 * SpinBackoff::kFirstQuiet + SpinBackoff::kCalm;
  EXPECT_TRUE(b.MaySpin(t));
  EXPECT_EQ(QuietAfterLateYields(b, &t), SpinBackoff::kFirstQuiet);
}

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(SocketPair, ASpinningReadAssemblesBytesWrittenInPieces) {
  std::thread writer([fd = fds_[1]] {
    ASSERT_EQ(write(fd, "abc", 3), 3);
    ASSERT_EQ(write(fd, "defg", 4), 4);
  });
  char buf[7];
  EXPECT_TRUE(ReadFull(fds_[0], buf, sizeof(buf), 10000, 100).ok());
  writer.join();
  EXPECT_EQ(std::string(buf, sizeof(buf)), "abcdefg");
}

TEST_F(SocketPair, ASpinningReadOfAClosedPeerSaysConnectionClosed) {
  close(fds_[1]);
  fds_[1] = -1;
  char buf[4];
  const Status st = ReadFull(fds_[0], buf, sizeof(buf), 1000, 100);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(SpinReadable(fds_[0], 100));  // end of stream counts as readable
}

}  // namespace
}  // namespace tierkv::proto
