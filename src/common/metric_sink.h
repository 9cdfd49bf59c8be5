// MetricSink: how a component reports its counters and gauges. The component
// that owns a counter names its families (MetricFamily, next to the counter)
// and writes their samples into a sink when asked (a ReportMetrics(MetricSink&)
// method, or a MetricReporter); the sink decides what becomes of them: the
// Prometheus text of /metrics (PrometheusText) or a test's lookup table
// (MetricCapture). So a counter is read once, by its owner, on its way out.
//
// A family's samples follow its Family() call; a family is reported once per
// scrape, by one owner.
//
// Thread-safety: a sink is used by one thread at a time; reporters read their
// own counters as they would for any other reader.
#ifndef TIERKV_COMMON_METRIC_SINK_H_
#define TIERKV_COMMON_METRIC_SINK_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace tierkv {

// One metric family: its name, Prometheus type ("counter" | "gauge") and help.
struct MetricFamily {
  const char* name;
  const char* type;
  const char* help;
};

// `key="value"`, with `\`, `"` and newlines in the value escaped as the
// exposition format asks.
std::string MetricLabel(std::string_view key, std::string_view value);

class MetricSink {
 public:
  virtual ~MetricSink() = default;

  // Starts a family whose samples follow.
  virtual void Family(std::string_view name, std::string_view type, std::string_view help) = 0;
  // One sample of the family started last; `labels` is "" or a comma-joined
  // list of MetricLabel()s.
  virtual void Sample(std::string_view name, std::string_view labels, uint64_t value) = 0;
  virtual void SampleDouble(std::string_view name, std::string_view labels, double value) = 0;

  void Family(const MetricFamily& f) { Family(f.name, f.type, f.help); }
  // A family of one unlabelled sample.
  void One(const MetricFamily& f, uint64_t value);
  void OneDouble(const MetricFamily& f, double value);
  // A family of one sample per value of label `key`, in the order given.
  void ByLabel(const MetricFamily& f, std::string_view key,
               std::initializer_list<std::pair<const char*, uint64_t>> samples);
};

// Something that reports families into a sink, in the order it writes them.
using MetricReporter = std::function<void(MetricSink&)>;

// A component, or a group of them, that reports its families.
class MetricSource {
 public:
  virtual ~MetricSource() = default;
  virtual void ReportMetrics(MetricSink& sink) const = 0;  // thread-safe
};

// The Prometheus text exposition format (version 0.0.4).
class PrometheusText final : public MetricSink {
 public:
  using MetricSink::Family;
  void Family(std::string_view name, std::string_view type, std::string_view help) override;
  void Sample(std::string_view name, std::string_view labels, uint64_t value) override;
  void SampleDouble(std::string_view name, std::string_view labels, double value) override;
  std::string Take() { return std::move(out_); }

 private:
  void Series(std::string_view name, std::string_view labels);
  std::string out_;
};

// Every sample by series (`name` or `name{labels}`), for tests.
class MetricCapture final : public MetricSink {
 public:
  using MetricSink::Family;
  void Family(std::string_view name, std::string_view, std::string_view) override {
    families_[std::string(name)]++;
  }
  void Sample(std::string_view name, std::string_view labels, uint64_t value) override {
    values_[Series(name, labels)] = static_cast<double>(value);
  }
  void SampleDouble(std::string_view name, std::string_view labels, double value) override {
    values_[Series(name, labels)] = value;
  }
  // The sample's value; -1 when it was not reported.
  double Value(std::string_view series) const {
    const auto it = values_.find(std::string(series));
    return it == values_.end() ? -1 : it->second;
  }
  // How many times family `name` was started (1 when reported correctly).
  int Families(std::string_view name) const {
    const auto it = families_.find(std::string(name));
    return it == families_.end() ? 0 : it->second;
  }

 private:
  static std::string Series(std::string_view name, std::string_view labels) {
    std::string s(name);
    if (!labels.empty()) s += "{" + std::string(labels) + "}";
    return s;
  }
  std::map<std::string, double> values_;
  std::map<std::string, int> families_;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_METRIC_SINK_H_
