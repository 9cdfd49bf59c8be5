#include "server/client_metrics.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

TEST(ClientMetrics, LatestReportPerRankThenStaleThenForgotten) {
  ClientMetrics m(/*stale_after_ms=*/10000, /*forget_after_ms=*/60000);
  proto::ReportMetricsRequest r;
  r.rank = 4;
  proto::OpWindow put;
  put.op = 0;
  put.window_bytes = 100;
  put.cum_bytes = 1000;
  r.ops = {put};
  m.Report(r, 1000);
  r.ops[0].cum_bytes = 2000;
  m.Report(r, 2000);
  auto v = m.Snapshot(3000);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rank, 4u);
  EXPECT_FALSE(v[0].stale);
  EXPECT_TRUE(v[0].present[0]);
  EXPECT_FALSE(v[0].present[1]);
  EXPECT_EQ(v[0].ops[0].cum_bytes, 2000u);
  EXPECT_TRUE(m.Snapshot(12001)[0].stale);
  EXPECT_TRUE(m.Snapshot(62001).empty());
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
