#include "common/metric_sink.h"

#include <cstdio>

namespace tierkv {

std::string MetricLabel(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (const char c : value) {  // the exposition format's three escapes
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

void MetricSink::One(const MetricFamily& f, uint64_t value) {
  Family(f);
  Sample(f.name, "", value);
}

void MetricSink::OneDouble(const MetricFamily& f, double value) {
  Family(f);
  SampleDouble(f.name, "", value);
}

void MetricSink::ByLabel(const MetricFamily& f, std::string_view key,
                         std::initializer_list<std::pair<const char*, uint64_t>> samples) {
  Family(f);
  for (const auto& [label, value] : samples) Sample(f.name, MetricLabel(key, label), value);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += help;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusText::Series(std::string_view name, std::string_view labels) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    out_ += labels;
    out_ += '}';
  }
  out_ += ' ';
}

void PrometheusText::Sample(std::string_view name, std::string_view labels, uint64_t value) {
  Series(name, labels);
  out_ += std::to_string(value);
  out_ += '\n';
}

void PrometheusText::SampleDouble(std::string_view name, std::string_view labels, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  Series(name, labels);
  out_ += buf;
  out_ += '\n';
}

}  // namespace tierkv
