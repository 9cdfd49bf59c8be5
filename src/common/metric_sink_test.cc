#include "common/metric_sink.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

constexpr MetricFamily kCount{"x_total", "counter", "Things counted"};
constexpr MetricFamily kRatio{"x_ratio", "gauge", "A ratio"};

TEST(PrometheusText, WritesHelpTypeAndSamplesInTheExpositionFormat) {
  PrometheusText text;
  text.One(kCount, 7);
  text.ByLabel(kCount, "kind", {{"a", 1}, {"b", 0}});
  text.OneDouble(kRatio, 0.25);
  text.Family("y", "gauge", "Why");
  text.Sample("y", MetricLabel("rank", "3") + "," + MetricLabel("medium", "dram"),
              18446744073709551615u);
  EXPECT_EQ(text.Take(),
            "# HELP x_total Things counted\n# TYPE x_total counter\nx_total 7\n"
            "# HELP x_total Things counted\n# TYPE x_total counter\n"
            "x_total{kind=\"a\"} 1\nx_total{kind=\"b\"} 0\n"
            "# HELP x_ratio A ratio\n# TYPE x_ratio gauge\nx_ratio 0.25\n"
            "# HELP y Why\n# TYPE y gauge\ny{rank=\"3\",medium=\"dram\"} 18446744073709551615\n");
}

TEST(MetricLabel, EscapesBackslashQuoteAndNewline) {
  EXPECT_EQ(MetricLabel("name", "GPU \"A\"\\x\ny"), "name=\"GPU \\\"A\\\"\\\\x\\ny\"");
  EXPECT_EQ(MetricLabel("rank", "3"), "rank=\"3\"");
}

TEST(PrometheusText, DoublesKeepNineSignificantDigits) {
  PrometheusText text;
  text.Family("d", "gauge", "D");
  text.SampleDouble("d", "", 1.0 / 3.0);
  text.SampleDouble("d", "", 0);
  EXPECT_EQ(text.Take(), "# HELP d D\n# TYPE d gauge\nd 0.333333333\nd 0\n");
}

TEST(MetricCapture, FindsEverySeriesAndCountsFamilies) {
  MetricCapture capture;
  const MetricReporter report = [](MetricSink& sink) {
    sink.ByLabel(kCount, "kind", {{"a", 4}, {"b", 5}});
    sink.OneDouble(kRatio, 0.5);
  };
  report(capture);
  EXPECT_EQ(capture.Value("x_total{kind=\"a\"}"), 4);
  EXPECT_EQ(capture.Value("x_total{kind=\"b\"}"), 5);
  EXPECT_EQ(capture.Value("x_ratio"), 0.5);
  EXPECT_EQ(capture.Value("x_total"), -1);  // only labelled samples were reported
  EXPECT_EQ(capture.Families("x_total"), 1);
  EXPECT_EQ(capture.Families("nothing"), 0);
}

}  // namespace
}  // namespace tierkv
