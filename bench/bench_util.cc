#include "bench_util.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace tierkv::bench {

double Series::PercentileUs(double p) const {
  if (latencies.empty()) return 0;
  std::vector<double> v = latencies;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i] * 1e6;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const Series* FindSeries(const std::vector<Series>& all, const std::string& name, uint64_t size,
                         int threads) {
  for (const Series& s : all) {
    if (s.name == name && s.object_bytes == size && s.threads == threads) return &s;
  }
  return nullptr;
}

std::vector<Series> MedianSeries(const std::vector<std::vector<Series>>& rounds) {
  std::vector<Series> out;
  if (rounds.empty()) return out;
  for (const Series& first : rounds[0]) {
    std::vector<const Series*> same;
    for (const auto& round : rounds) {
      for (const Series& s : round) {
        if (s.name == first.name && s.object_bytes == first.object_bytes &&
            s.threads == first.threads) {
          same.push_back(&s);
          break;
        }
      }
    }
    std::sort(same.begin(), same.end(),
              [](const Series* a, const Series* b) { return a->OpsPerSec() < b->OpsPerSec(); });
    out.push_back(*same[same.size() / 2]);
  }
  return out;
}

std::vector<Ratio> MedianRatios(const std::vector<std::vector<Ratio>>& rounds) {
  std::vector<Ratio> out;
  if (rounds.empty()) return out;
  for (const Ratio& first : rounds[0]) {
    std::vector<double> values;
    for (const auto& round : rounds) {
      for (const Ratio& r : round) {
        if (r.name == first.name) {
          values.push_back(r.value);
          break;
        }
      }
    }
    out.push_back({first.name, Median(values), first.target});
  }
  return out;
}

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

void PrintTable(const std::vector<Series>& series) {
  std::printf("%-34s %8s %4s %10s %12s %9s %11s %11s\n", "series", "size", "thr", "ops", "ops/s",
              "GB/s", "p50 us", "p99 us");
  for (const Series& s : series) {
    std::printf("%-34s %8s %4d %10llu %12.0f %9.2f %11.1f %11.1f\n", s.name.c_str(),
                SizeName(s.object_bytes).c_str(), s.threads, static_cast<unsigned long long>(s.ops),
                s.OpsPerSec(), s.GBps(), s.PercentileUs(50), s.PercentileUs(99));
  }
}

void PrintRatios(const std::vector<Ratio>& ratios) {
  std::printf("\n%-52s %8s %8s %6s\n", "ratio (same run)", "value", "target", "met");
  for (const Ratio& r : ratios) {
    if (r.target > 0) {
      std::printf("%-52s %8.2f %8.2f %6s\n", r.name.c_str(), r.value, r.target,
                  r.value >= r.target ? "yes" : "NO");
    } else {
      std::printf("%-52s %8.2f %8s %6s\n", r.name.c_str(), r.value, "-", "-");
    }
  }
}

bool WriteJson(const std::string& path, const std::vector<Series>& series,
               const std::vector<Ratio>& ratios, int rounds) {
  std::ofstream out(path);
  if (!out) return false;
  out << "{\n  \"cores\": " << std::thread::hardware_concurrency() << ",\n";
  if (rounds > 0) out << "  \"rounds\": " << rounds << ",\n";
  out << "  \"series\": [\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    out << "    {\"name\": \"" << s.name << "\", \"object_bytes\": " << s.object_bytes
        << ", \"threads\": " << s.threads << ", \"ops\": " << s.ops
        << ", \"seconds\": " << s.seconds << ", \"ops_per_sec\": " << s.OpsPerSec()
        << ", \"gb_per_sec\": " << s.GBps() << ", \"p50_us\": " << s.PercentileUs(50)
        << ", \"p99_us\": " << s.PercentileUs(99) << "}" << (i + 1 < series.size() ? "," : "")
        << "\n";
  }
  out << "  ],\n  \"ratios\": [\n";
  for (size_t i = 0; i < ratios.size(); ++i) {
    out << "    {\"name\": \"" << ratios[i].name << "\", \"value\": " << ratios[i].value
        << ", \"target\": " << ratios[i].target << "}" << (i + 1 < ratios.size() ? "," : "")
        << "\n";
  }
  out << "  ]\n}\n";
  return static_cast<bool>(out);
}

int FinishReport(const std::string& path, const std::vector<Series>& series,
                 const std::vector<Ratio>& ratios, int rounds) {
  if (path.empty()) return 0;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  if (!WriteJson(path, series, ratios, rounds)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("\nwrote %s\n", path.c_str());
  return 0;
}

std::string MakePeerDir(const std::string& name) {
  std::string tmpl = "/tmp/tierkv-bench-" + name + "-XXXXXX";
  return mkdtemp(tmpl.data()) == nullptr ? std::string() : tmpl;
}

bool AwaitPeer(pid_t pid, const std::function<bool()>& up) {
  for (int i = 0; i < 100; ++i) {
    if (up()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

void StopPeer(pid_t pid, const std::string& dir) {
  if (pid > 0) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

}  // namespace tierkv::bench
