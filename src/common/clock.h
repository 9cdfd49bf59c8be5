// Clock seam: components read time through this interface (with the
// Scheduler of common/scheduler.h for their threads) so tests can drive
// expiry, stalls and fences deterministically on a ManualClock.
#ifndef TIERKV_COMMON_CLOCK_H_
#define TIERKV_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace tierkv {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds (CLOCK_MONOTONIC on the real clock, so two
  // processes on the same host agree on it). Thread-safe.
  virtual int64_t NowNanos() const = 0;
  // Wall-clock milliseconds since the Unix epoch. Thread-safe.
  virtual int64_t NowUnixMillis() const = 0;
};

// The process-wide real clock. Never null; lives forever.
Clock* RealClock();

// A clock that moves only when told to. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_nanos = 1'000'000'000) : now_(start_nanos) {}
  int64_t NowNanos() const override { return now_.load(std::memory_order_acquire); }
  int64_t NowUnixMillis() const override { return 1'700'000'000'000 + NowNanos() / 1'000'000; }
  void AdvanceMillis(int64_t ms) { now_.fetch_add(ms * 1'000'000, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_CLOCK_H_
