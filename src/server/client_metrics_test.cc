#include "server/client_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tierkv {
namespace {

proto::ReportMetricsRequest PutReport(uint32_t rank, uint64_t cum_bytes) {
  proto::ReportMetricsRequest r;
  r.rank = rank;
  proto::OpWindow put;
  put.op = 0;
  put.window_bytes = 100;
  put.cum_bytes = cum_bytes;
  r.ops = {put};
  return r;
}

TEST(ClientMetrics, LatestReportPerRankThenStaleThenDroppedWithItsSessions) {
  ClientMetrics m(/*max_ranks=*/16, /*stale_after_ms=*/10000);
  ASSERT_TRUE(m.Report(/*session=*/1, PutReport(4, 1000), 1000).ok());
  ASSERT_TRUE(m.Report(/*session=*/2, PutReport(4, 2000), 2000).ok());
  auto v = m.Snapshot(3000);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rank, 4u);
  EXPECT_FALSE(v[0].stale);
  EXPECT_TRUE(v[0].present[0]);
  EXPECT_FALSE(v[0].present[1]);
  EXPECT_EQ(v[0].ops[0].cum_bytes, 2000u);
  EXPECT_TRUE(m.Snapshot(12001)[0].stale);
  m.EndSession(1);
  EXPECT_EQ(m.Snapshot(12001).size(), 1u);  // session 2 still reports rank 4
  m.EndSession(2);
  EXPECT_TRUE(m.Snapshot(12001).empty());
  EXPECT_EQ(m.Stats().ranks, 0u);
}

TEST(ClientMetrics, RanksAreBoundedAndOverTheBoundReportsAreRefusedAndCounted) {
  ClientMetrics m(/*max_ranks=*/3);
  for (uint32_t r = 0; r < 3; ++r) ASSERT_TRUE(m.Report(7, PutReport(r, 1), 0).ok());
  EXPECT_EQ(m.Report(7, PutReport(99, 1), 0).code(), Code::kNoSpace);
  EXPECT_TRUE(m.Report(8, PutReport(1, 5), 0).ok());  // a known rank still updates
  EXPECT_EQ(m.Snapshot(0).size(), 3u);
  EXPECT_EQ(m.Stats().refused_reports, 1u);
  m.EndSession(7);
  EXPECT_EQ(m.Snapshot(0).size(), 1u);  // only rank 1, which session 8 reported
  EXPECT_TRUE(m.Report(9, PutReport(99, 1), 0).ok());
}

TEST(ClientMetrics, NonFiniteOrNegativeValuesAreRejected) {
  ClientMetrics m;
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL, -1.0}) {
    proto::ReportMetricsRequest r = PutReport(1, 1);
    r.ops[0].p99_s = bad;
    EXPECT_EQ(m.Report(1, r, 0).code(), Code::kInvalidArgument);
  }
  EXPECT_TRUE(m.Snapshot(0).empty());
  EXPECT_EQ(m.Stats().rejected_reports, 4u);
}

TEST(ReportMetrics, RoundTripsAndRejectsUnknownOps) {
  proto::ReportMetricsRequest r;
  r.rank = 7;
  proto::OpWindow w;
  w.op = 2;
  w.p99_s = 0.125;
  w.bytes_per_sec = 1.5e9;
  r.ops = {w};
  std::string buf;
  proto::Writer wr(&buf);
  r.Encode(wr);
  proto::ReportMetricsRequest got;
  proto::Reader rd(buf);
  ASSERT_TRUE(got.Decode(rd).ok());
  EXPECT_EQ(got.rank, 7u);
  EXPECT_DOUBLE_EQ(got.ops[0].p99_s, 0.125);
  EXPECT_DOUBLE_EQ(got.ops[0].bytes_per_sec, 1.5e9);
  buf[5] = 9;  // op code of the first window
  proto::Reader bad(buf);
  EXPECT_EQ(got.Decode(bad).code(), Code::kProtocolError);
}

}  // namespace
}  // namespace tierkv
