// The busy-poll back-off's rule, on explicit times, ReadFull's spin path
// against a writer in pieces and a closed peer, and BufferedReader.

#include "protocol/socket_io.h"

#include <fcntl.h>
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

// Writes all of `data` to `fd` (the socket buffer holds it).
void Put(int fd, const std::string& data) {
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
}

std::string ReadN(BufferedReader& r, int fd, size_t n, Status* st = nullptr) {
  std::string out(n, '\0');
  Status s = r.Read(fd, out.data(), n, 1000);
  if (st != nullptr) *st = s;
  return s.ok() ? out : std::string();
}

TEST_F(SocketPair, ABufferedReaderServesTheFrameBehindFromItsBuffer) {
  // Two frames of 24 + 8 bytes sent together: one recv brings both.
  const std::string a = std::string(24, 'h') + "bodyAAAA";
  const std::string b = std::string(24, 'H') + "bodyBBBB";
  Put(fds_[1], a + b);
  BufferedReader r;
  EXPECT_EQ(ReadN(r, fds_[0], 24), a.substr(0, 24));
  EXPECT_EQ(r.buffered(), 8 + b.size());
  EXPECT_EQ(ReadN(r, fds_[0], 8), "bodyAAAA");
  // The socket is empty now: the second frame is only in the buffer, and a
  // wait for the next request must find it there.
  EXPECT_FALSE(SpinReadable(fds_[0], 0));
  EXPECT_TRUE(r.SpinFill(fds_[0], 0));
  EXPECT_EQ(ReadN(r, fds_[0], 24), b.substr(0, 24));
  EXPECT_EQ(ReadN(r, fds_[0], 8), "bodyBBBB");
  EXPECT_EQ(r.buffered(), 0u);
  EXPECT_FALSE(r.SpinFill(fds_[0], 0));  // nothing buffered, no spin: not readable
}

TEST_F(SocketPair, ALongRestGoesStraightToTheCallerAndWhatFollowsIsKept) {
  std::string big(3 * BufferedReader::kCapacity, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  Put(fds_[1], "0123456789" + big + "tail");
  BufferedReader r;
  EXPECT_EQ(ReadN(r, fds_[0], 4), "0123");
  // Six bytes of it come from the buffer, the rest from the socket.
  EXPECT_EQ(ReadN(r, fds_[0], 6 + big.size()), "456789" + big);
  EXPECT_EQ(ReadN(r, fds_[0], 4), "tail");
}

TEST_F(SocketPair, ABufferedReaderWaitsForARestWrittenLater) {
  BufferedReader r;
  std::thread writer([fd = fds_[1]] {
    Put(fd, "abc");
    Put(fd, "defg");
  });
  EXPECT_EQ(ReadN(r, fds_[0], 7), "abcdefg");
  writer.join();
}

TEST_F(SocketPair, AnEndOfStreamInsideAFrameIsAnIoErrorEvenWhenItsStartWasBuffered) {
  Put(fds_[1], std::string(30, 'x'));
  close(fds_[1]);
  fds_[1] = -1;
  BufferedReader r;
  EXPECT_EQ(ReadN(r, fds_[0], 24), std::string(24, 'x'));
  Status st;
  ReadN(r, fds_[0], 24, &st);  // 6 buffered bytes, then the end
  EXPECT_EQ(st.code(), Code::kIoError) << st.ToString();
  ReadN(r, fds_[0], 24, &st);  // nothing at all: a clean close
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(r.SpinFill(fds_[0], 100));  // end of stream counts as readable
}

TEST_F(SocketPair, ClearDropsWhatWasBufferedAndReleaseKeepsItUntilThen) {
  Put(fds_[1], "stale bytes");
  BufferedReader r;
  EXPECT_EQ(ReadN(r, fds_[0], 1), "s");
  EXPECT_GT(r.buffered(), 0u);
  r.Release();  // not while bytes are buffered
  EXPECT_EQ(ReadN(r, fds_[0], 4), "tale");
  r.Clear();
  EXPECT_EQ(r.buffered(), 0u);
  r.Release();
  Put(fds_[1], "fresh");
  EXPECT_EQ(ReadN(r, fds_[0], 5), "fresh");
}

}  // namespace
}  // namespace tierkv::proto

namespace tierkv::proto {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) >= 0; }

TEST_F(SocketPair, ABufferedReaderCollectingDescriptorsKeepsThoseSentWithTheBytes) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  FdQueue queue;
  BufferedReader reader;
  reader.CollectFds(&queue);
  // Two frames' bytes, a descriptor with the second.
  ASSERT_TRUE(WriteFull(fds_[0], "aaaa", 4, 1000).ok());
  const int pass[] = {pipe_fds[0]};
  ASSERT_TRUE(WriteWithFds(fds_[0], "bbbb", 4, pass).ok());
  char got[8];
  ASSERT_TRUE(reader.Read(fds_[1], got, 8, 1000).ok());
  EXPECT_EQ(std::string(got, 8), "aaaabbbb");
  ASSERT_EQ(queue.size(), 1u);
  const int received = queue.Take();
  ASSERT_GE(received, 0);
  // The same pipe: what is written at one end is read at the received one.
  ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
  char x = 0;
  EXPECT_EQ(read(received, &x, 1), 1);
  EXPECT_EQ(x, 'x');
  EXPECT_EQ(queue.Take(), -1);
  close(received);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(FdQueue, OneThatComesWhenFullIsClosedAndTheRestOnDestruction) {
  int a[2], b[2], c[2];
  ASSERT_EQ(pipe(a), 0);
  ASSERT_EQ(pipe(b), 0);
  ASSERT_EQ(pipe(c), 0);
  {
    FdQueue q;
    q.Push(a[0]);
    q.Push(b[0]);
    q.Push(c[0]);  // over capacity: closed at once
    EXPECT_FALSE(IsOpen(c[0]));
    EXPECT_EQ(q.size(), FdQueue::kCapacity);
    EXPECT_EQ(q.Take(), a[0]);  // oldest first; now the caller's
    EXPECT_TRUE(IsOpen(b[0]));
  }
  EXPECT_TRUE(IsOpen(a[0]));
  EXPECT_FALSE(IsOpen(b[0]));  // closed with the queue
  close(a[0]);
  for (int fd : {a[1], b[1], c[1]}) close(fd);
}

}  // namespace
}  // namespace tierkv::proto
