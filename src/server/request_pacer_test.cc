#include "server/request_pacer.h"

#include <gtest/gtest.h>

#include "protocol/frame.h"

namespace tierkv {
namespace {

constexpr uint16_t kLease = static_cast<uint16_t>(proto::Opcode::kLease);
constexpr uint16_t kRelease = static_cast<uint16_t>(proto::Opcode::kRelease);

TEST(RequestPacerTest, ATightLoopIsPolledAndAnIdleClientSleeps) {
  RequestPacer p(400);
  for (int i = 0; i < 20; ++i) p.Record(30, kRelease);
  RequestPacer::Plan busy = p.Next(200, true);
  EXPECT_GT(busy.spin_us, 0);
  EXPECT_LE(busy.spin_us, 400);
  EXPECT_EQ(busy.paced_gap_us, 0);
  EXPECT_EQ(busy.wait_ms, RequestPacer::kMinParkWaitMs);  // short gaps: the floor

  RequestPacer idle(400);
  for (int i = 0; i < 20; ++i) idle.Record(150'000, kRelease);
  RequestPacer::Plan slow = idle.Next(200, true);
  EXPECT_EQ(slow.spin_us, 0);
  EXPECT_EQ(slow.paced_gap_us, 0);  // far longer than the paced window
  EXPECT_EQ(slow.wait_ms, 200);     // twice the gap, capped at park_ms
}

TEST(RequestPacerTest, AClientSlowerThanTheSpinAfterALeaseIsAwaitedPaced) {
  RequestPacer p(400);
  for (int i = 0; i < 20; ++i) {
    p.Record(20, kLease);       // the lease comes right after the release
    p.Record(1'500, kRelease);  // the release comes once the value is copied
  }
  // The last request answered was a release: the next one comes at once.
  EXPECT_EQ(p.Next(200, true).paced_gap_us, 0);
  p.Record(20, kLease);
  RequestPacer::Plan after_lease = p.Next(200, true);
  EXPECT_EQ(after_lease.spin_us, 0);
  EXPECT_GT(after_lease.paced_gap_us, 1'000);
  EXPECT_LT(after_lease.paced_gap_us, 2'000);
  // Never before the handshake, and never with spinning off.
  EXPECT_EQ(p.Next(200, false).paced_gap_us, 0);
  RequestPacer off(0);
  for (int i = 0; i < 20; ++i) off.Record(1'500, kLease);
  EXPECT_EQ(off.Next(200, true).paced_gap_us, 0);
}

TEST(RequestPacerTest, NeverParkingMeansWaitingForever) {
  RequestPacer p(400);
  EXPECT_EQ(p.Next(-1, true).wait_ms, -1);
}

}  // namespace
}  // namespace tierkv
