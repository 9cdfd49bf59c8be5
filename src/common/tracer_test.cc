#include "common/tracer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tierkv {
namespace {

TEST(Tracepoint, BucketsAreWithinFivePercent) {
  for (uint64_t ns : {1ull, 15ull, 16ull, 17ull, 1000ull, 123456ull, 987654321ull, 1ull << 40}) {
    const double v = Tracepoint::BucketValue(Tracepoint::BucketOf(ns));
    EXPECT_LE(std::abs(v - static_cast<double>(ns)), 0.05 * ns + 1) << ns;
  }
  EXPECT_LT(Tracepoint::BucketOf(1000), Tracepoint::BucketOf(2000));
}

TEST(Tracepoint, CountsAndPercentiles) {
  Tracepoint tp("TP_TEST");
  for (int i = 1; i <= 1000; ++i) {
    tp.Begin();
    tp.End(i % 10 != 0, static_cast<uint64_t>(i) * 1000);  // 1..1000 us; every tenth bad
  }
  tp.Begin();  // one still in flight
  const TraceSnapshot s = tp.Snapshot();
  EXPECT_EQ(s.begin, 1001u);
  EXPECT_EQ(s.good_end, 900u);
  EXPECT_EQ(s.bad_end, 100u);
  EXPECT_EQ(s.on_fly, 1u);
  EXPECT_EQ(s.begin, s.good_end + s.bad_end + s.on_fly);
  EXPECT_NEAR(s.p50_us, 500, 25);
  EXPECT_NEAR(s.p99_us, 990, 50);
  EXPECT_NEAR(s.avg_us, 500.5, 0.01);
  EXPECT_DOUBLE_EQ(s.max_us, 1000);
  EXPECT_LE(s.p999_us, s.max_us);
}

TEST(Tracer, ScopesEndBadUnlessMarkedAndTableHasTheContractColumns) {
  Tracepoint* tp = Tracer::Global().Get("TP_SCOPE_TEST");
  EXPECT_EQ(tp, Tracer::Global().Get("TP_SCOPE_TEST"));
  { TraceScope s(tp); }  // abandoned: bad
  {
    TraceScope s(tp);
    s.End(true);
  }
  const TraceSnapshot snap = tp->Snapshot();
  EXPECT_EQ(snap.good_end, 1u);
  EXPECT_EQ(snap.bad_end, 1u);
  const std::string table = FormatTraceTable({snap}, "2026-01-05 14:57:03");
  EXPECT_EQ(table.rfind("TIME                   NAME", 0), 0u);
  EXPECT_NE(table.find("P50(us)        P99(us)        P999(us)       AVG(us)        MAX(us)"),
            std::string::npos);
  EXPECT_NE(table.find("2026-01-05 14:57:03    TP_SCOPE_TEST"), std::string::npos);
}

}  // namespace
}  // namespace tierkv
