// Tracer: named latency tracepoints (the REST contract's "ptracer").
//
// A tracepoint counts calls that began, ended well, ended badly, and are still
// in flight (BEGIN = GOOD_END + BAD_END + ON_FLY), and keeps a log-bucket
// histogram of durations: 16 buckets per power of two of nanoseconds, so a
// reported percentile is within about 4.5% of the true value. Recording is a
// handful of relaxed atomic increments; no locks.
//
// Usage:
//   static Tracepoint* tp = Tracer::Global().Get("TP_MMC_META_PUT");
//   TraceScope scope(tp);   ...   scope.End(ok);
//
// Thread-safety: everything is thread-safe. Tracepoints live forever.
#ifndef TIERKV_COMMON_TRACER_H_
#define TIERKV_COMMON_TRACER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tierkv {

struct TraceSnapshot {
  std::string name;
  uint64_t begin = 0, good_end = 0, bad_end = 0, on_fly = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0, avg_us = 0, max_us = 0;
};

class Tracepoint {
 public:
  static constexpr int kSubBuckets = 16;
  static constexpr int kBuckets = 64 * kSubBuckets;

  explicit Tracepoint(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  void Begin() { begin_.fetch_add(1, std::memory_order_relaxed); }
  void End(bool ok, uint64_t nanos);
  TraceSnapshot Snapshot() const;
  // Bucket index of a duration and the representative value of a bucket.
  static int BucketOf(uint64_t nanos);
  static double BucketValue(int bucket);

 private:
  const std::string name_;
  std::atomic<uint64_t> begin_{0}, good_{0}, bad_{0}, sum_ns_{0}, max_ns_{0};
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
};

class Tracer {
 public:
  static Tracer& Global();
  // The tracepoint called `name`, created on first use. Never null.
  Tracepoint* Get(std::string_view name);
  // Every tracepoint, in creation order.
  std::vector<TraceSnapshot> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Tracepoint>> points_;
};

// Times one call: Begin at construction, End at End() or destruction (bad).
class TraceScope {
 public:
  explicit TraceScope(Tracepoint* tp);
  ~TraceScope();
  void End(bool ok);
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracepoint* tp_;
  uint64_t start_ns_;
  bool ended_ = false;
};

// Renders snapshots as the contract's fixed-width table (one header line, one
// line per tracepoint, stamped with `time_text` such as "2026-01-05 14:57:03").
std::string FormatTraceTable(const std::vector<TraceSnapshot>& rows, const std::string& time_text);

}  // namespace tierkv

#endif  // TIERKV_COMMON_TRACER_H_
