#include "common/tracer.h"

#include <time.h>

#include <bit>
#include <cmath>
#include <cstdio>

namespace tierkv {
namespace {

uint64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int Tracepoint::BucketOf(uint64_t nanos) {
  if (nanos < kSubBuckets) return static_cast<int>(nanos);
  const int octave = std::bit_width(nanos) - 1;  // >= 4
  const int shift = octave - 4;                  // keep 4 bits below the leading one
  const int sub = static_cast<int>((nanos >> shift) & (kSubBuckets - 1));
  const int b = (octave - 3) * kSubBuckets + sub;
  return b < kBuckets ? b : kBuckets - 1;
}

double Tracepoint::BucketValue(int bucket) {
  if (bucket < kSubBuckets) return bucket;
  const int octave = bucket / kSubBuckets + 3;
  const int sub = bucket % kSubBuckets;
  // Midpoint of [ (16+sub) << shift, (17+sub) << shift ).
  return std::ldexp(16.0 + sub + 0.5, octave - 4);
}

void Tracepoint::End(bool ok, uint64_t nanos) {
  (ok ? good_ : bad_).fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(nanos, std::memory_order_relaxed);
  uint64_t prev = max_ns_.load(std::memory_order_relaxed);
  while (nanos > prev && !max_ns_.compare_exchange_weak(prev, nanos, std::memory_order_relaxed)) {
  }
  buckets_[BucketOf(nanos)].fetch_add(1, std::memory_order_relaxed);
}

TraceSnapshot Tracepoint::Snapshot() const {
  TraceSnapshot s;
  s.name = name_;
  s.good_end = good_.load(std::memory_order_relaxed);
  s.bad_end = bad_.load(std::memory_order_relaxed);
  s.begin = std::max(begin_.load(std::memory_order_relaxed), s.good_end + s.bad_end);
  s.on_fly = s.begin - s.good_end - s.bad_end;
  const uint64_t ended = s.good_end + s.bad_end;
  if (ended == 0) return s;
  std::array<uint64_t, kBuckets> counts;
  uint64_t total = 0;
  for (int i = 0; i < kBuckets; ++i) {
    counts[i] = buckets_[i].load(std::memory_order_relaxed);
    total += counts[i];
  }
  auto percentile = [&](double p) {
    const uint64_t rank = static_cast<uint64_t>(std::ceil(p * total));
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= rank && counts[i] > 0) return BucketValue(i) / 1000.0;
    }
    return 0.0;
  };
  s.max_us = max_ns_.load(std::memory_order_relaxed) / 1000.0;
  s.p50_us = std::min(percentile(0.50), s.max_us);
  s.p99_us = std::min(percentile(0.99), s.max_us);
  s.p999_us = std::min(percentile(0.999), s.max_us);
  s.avg_us = sum_ns_.load(std::memory_order_relaxed) / 1000.0 / static_cast<double>(ended);
  return s;
}

Tracer& Tracer::Global() {
  static Tracer* tracer = new Tracer();
  return *tracer;
}

Tracepoint* Tracer::Get(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : points_) {
    if (p->name() == name) return p.get();
  }
  points_.push_back(std::make_unique<Tracepoint>(std::string(name)));
  return points_.back().get();
}

std::vector<TraceSnapshot> Tracer::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceSnapshot> out;
  for (const auto& p : points_) out.push_back(p->Snapshot());
  return out;
}

TraceScope::TraceScope(Tracepoint* tp) : tp_(tp), start_ns_(MonoNanos()) { tp_->Begin(); }

TraceScope::~TraceScope() {
  if (!ended_) End(false);
}

void TraceScope::End(bool ok) {
  if (ended_) return;
  ended_ = true;
  tp_->End(ok, MonoNanos() - start_ns_);
}

std::string FormatTraceTable(const std::vector<TraceSnapshot>& rows, const std::string& time_text) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-23s%-40s%-15s%-15s%-15s%-15s%-15s%-15s%-15s%-15s%s\n",
                "TIME", "NAME", "BEGIN", "GOOD_END", "BAD_END", "ON_FLY", "P50(us)", "P99(us)",
                "P999(us)", "AVG(us)", "MAX(us)");
  out += line;
  for (const TraceSnapshot& r : rows) {
    std::snprintf(line, sizeof(line),
                  "%-23s%-40s%-15llu%-15llu%-15llu%-15llu%-15.3f%-15.3f%-15.3f%-15.3f%.3f\n",
                  time_text.c_str(), r.name.c_str(), static_cast<unsigned long long>(r.begin),
                  static_cast<unsigned long long>(r.good_end),
                  static_cast<unsigned long long>(r.bad_end),
                  static_cast<unsigned long long>(r.on_fly), r.p50_us, r.p99_us, r.p999_us,
                  r.avg_us, r.max_us);
    out += line;
  }
  return out;
}

}  // namespace tierkv
