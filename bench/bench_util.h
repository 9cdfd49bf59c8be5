// Small helpers for the benchmark driver: timing, percentiles, a table printer
// and a JSON writer (flat, no dependency).
#ifndef TIERKV_BENCH_BENCH_UTIL_H_
#define TIERKV_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tierkv::bench {

inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One measured series: per-op latencies (seconds) and totals.
struct Series {
  Series(std::string n, uint64_t size, int thr)
      : name(std::move(n)), object_bytes(size), threads(thr) {}
  std::string name;  // "tierkv uds put"
  uint64_t object_bytes = 0;
  int threads = 1;
  uint64_t ops = 0;
  double seconds = 0;  // wall time of the whole series
  std::vector<double> latencies;
  double GBps() const { return seconds > 0 ? ops * double(object_bytes) / seconds / 1e9 : 0; }
  double OpsPerSec() const { return seconds > 0 ? ops / seconds : 0; }
  double PercentileUs(double p) const;  // p in [0, 100]
};

struct Ratio {
  std::string name;  // "uds get 1MiB vs memcpy"
  double value = 0;
  double target = 0;  // 0: informational
};

// The median of `v` (the upper one of an even count); 0 when empty.
double Median(std::vector<double> v);

// Rounds of the same measurements, interleaved: per (name, size, threads) the
// series of the round with the median throughput, in the first round's order.
std::vector<Series> MedianSeries(const std::vector<std::vector<Series>>& rounds);
// Per name, the median of the rounds' values (each round's ratio is taken
// between figures of that round).
std::vector<Ratio> MedianRatios(const std::vector<std::vector<Ratio>>& rounds);

// The series named exactly `name` with that object size and thread count.
const Series* FindSeries(const std::vector<Series>& all, const std::string& name, uint64_t size,
                         int threads);

// Prints the series as an aligned table.
void PrintTable(const std::vector<Series>& series);
void PrintRatios(const std::vector<Ratio>& ratios);
// Writes {"series": [...], "ratios": [...]} to `path`; false on I/O error.
bool WriteJson(const std::string& path, const std::vector<Series>& series,
               const std::vector<Ratio>& ratios, int rounds = 0);

// Writes the JSON report to `path` (creating its directory; nothing when
// `path` is empty) and says where; returns the process exit status.
// `rounds` (> 0) is how many interleaved rounds each figure is the median of;
// it is written with the machine's core count.
int FinishReport(const std::string& path, const std::vector<Series>& series,
                 const std::vector<Ratio>& ratios, int rounds = 0);

std::string SizeName(uint64_t bytes);  // "4KiB", "1MiB"

// Peer servers of a benchmark (redis-server, memcached), each in a temp dir.
// A fresh "/tmp/tierkv-bench-<name>-XXXXXX"; "" on failure.
std::string MakePeerDir(const std::string& name);
// Polls up() every 50 ms for up to 5 s; on timeout kills and reaps `pid`.
bool AwaitPeer(pid_t pid, const std::function<bool()>& up);
// SIGTERM and reap `pid` (when > 0), then remove `dir` (when not empty).
void StopPeer(pid_t pid, const std::string& dir);

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_BENCH_UTIL_H_
