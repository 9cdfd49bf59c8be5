// tierkv_bench: the side-by-side benchmark of the standalone manager.
//
// Three interleaved rounds (one with --quick) of:
//   - the baseline: single-thread memcpy between different slots of two large
//     buffers (so every copy comes from DRAM, not from cache);
//   - tierkv put (plain and with pipelined commits) and get (GB/s, ops/s,
//     p50/p99) for 4 KiB .. 4 MiB objects with 1 and 2 client threads, over
//     the Unix socket (shared memory) and TCP;
//   - batched 4 KiB exist and get, 16 and 128 keys per call, 1, 2 and 4
//     client threads;
//   - redis-server on a Unix socket: hiredis SET/GET of the same sizes (cold:
//     new keys; warm: overwriting), redis-benchmark GET and EXISTS at the same
//     concurrency and pipeline depth as the batched tierkv runs;
//   - memcached on a Unix socket, meta commands: set/get of 4 KiB and 1 MiB
//     (cold and warm), pipelined mg batches at the same concurrency;
// then prints the median round of each series, the median of each ratio, and
// writes JSON (--json PATH).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_runs.h"
#include "bench_util.h"
#include "manager_process.h"
#include "memcached_peer.h"
#include "redis_peer.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

struct Options {
  std::string json = "bench/results/latest.json";
  bool quick = false;
  // --batched-only: only the batched 4 KiB exist/get runs and their peers'
  // (three rounds still), for work on the batch path.
  bool batched_only = false;
  // --server-spin-us US: the manager's --spin-us (its default when unset).
  std::string server_spin_us;
  // --client-only ADDRESS: measure only put/get of --size bytes by --threads
  // threads (1 by default) against a running manager and print the two series
  // as JSON (for bench/python_bench.py).
  std::string client_only;
  uint64_t size = 1 << 20;
  uint64_t count = 512;
  int threads = 1;
  // --batch N (with --client-only): batched 4 KiB exist and get of N keys per
  // call instead, over --count keys per thread stored first, --passes times.
  size_t batch = 0;
  int passes = 3;
};

uint64_t CountFor(uint64_t size, bool quick) {
  const uint64_t budget = (quick ? 64 : 256) * kMiB;
  return std::clamp<uint64_t>(budget / size, 64, quick ? 2000 : 20000);
}

int ClientOnly(const Options& opt) {
  std::vector<Series> series;
  if (opt.batch > 0) {
    if (!PreloadBatchKeys(opt.client_only, opt.threads, opt.count)) return 1;
    RunBatched(opt.client_only, opt.count, opt.batch, opt.threads, opt.passes, &series);
    if (series.size() != 2) return 1;
    std::printf("{\"exist_ops\": %.0f, \"get_ops\": %.0f, \"get_p50_us\": %.1f}\n",
                series[0].OpsPerSec(), series[1].OpsPerSec(), series[1].PercentileUs(50));
    return 0;
  }
  RunTierkv(opt.client_only, "client", opt.size, opt.count, opt.threads, /*pipelined=*/false,
            &series);
  if (series.size() != 2) return 1;
  std::printf(
      "{\"put_gbps\": %.4f, \"get_gbps\": %.4f, \"put_p50_us\": %.1f, "
      "\"get_p50_us\": %.1f, \"put_p99_us\": %.1f, \"get_p99_us\": %.1f, \"put_max_us\": %.1f, "
      "\"get_max_us\": %.1f}\n",
      series[0].GBps(), series[1].GBps(), series[0].PercentileUs(50), series[1].PercentileUs(50),
      series[0].PercentileUs(99), series[1].PercentileUs(99), series[0].PercentileUs(100),
      series[1].PercentileUs(100));
  return 0;
}

constexpr int kConcurrency[] = {1, 2, 4};
constexpr size_t kBatches[] = {16, 128};

struct Peers {
  RedisPeer* redis = nullptr;
  MemcachedPeer* memcached = nullptr;
  uint64_t keys_per_thread = 0;  // batched 4 KiB keys each thread owns
};

// One round of every measurement.
std::vector<Series> RunRound(const Options& opt, const testing::ManagerProcess& manager,
                             const Peers& peers) {
  std::vector<Series> series;
  std::vector<uint64_t> sizes = {4 * kKiB, 64 * kKiB, kMiB, 4 * kMiB};
  if (opt.batched_only) sizes.clear();
  for (uint64_t size : sizes) series.push_back(MemcpyBaseline(size, CountFor(size, opt.quick)));
  for (const bool uds : {true, false}) {
    for (uint64_t size : sizes) {
      for (int threads : {1, 2}) {
        RunTierkv(uds ? manager.uds() : manager.tcp(), uds ? "uds" : "tcp", size,
                  CountFor(size, opt.quick), threads, /*pipelined=*/false, &series);
        if (uds) {
          RunTierkv(manager.uds(), "uds", size, CountFor(size, opt.quick), threads,
                    /*pipelined=*/true, &series);
        }
      }
    }
  }
  const int passes = opt.quick ? 1 : 3;
  for (int threads : kConcurrency) {
    for (size_t batch : kBatches) {
      RunBatched(manager.uds(), peers.keys_per_thread, batch, threads, passes, &series);
    }
  }
  if (peers.redis != nullptr) {
    for (uint64_t size : sizes) {
      for (const bool warm : {false, true}) {
        const std::string suffix = warm ? " warm" : " cold";
        Series put{"redis hiredis uds SET" + suffix, size, 1};
        Series get{"redis hiredis uds GET" + suffix, size, 1};
        if (peers.redis->RunSetGet(size, CountFor(size, opt.quick), warm, &put, &get)) {
          series.push_back(std::move(put));
          series.push_back(std::move(get));
        }
      }
    }
    const uint64_t keyspace = peers.keys_per_thread * 4;
    for (int clients : kConcurrency) {
      for (size_t batch : kBatches) {
        for (const char* cmd : {"GET", "EXISTS"}) {
          const uint64_t requests = (opt.quick ? 50000 : 200000) * clients;
          Series rb{std::string("redis-benchmark ") + cmd + " -P" + std::to_string(batch),
                    kBatchValueBytes, clients};
          const double ops =
              peers.redis->CommandOps(std::string(cmd) + " key:__rand_int__",
                                      static_cast<int>(batch), clients, requests, keyspace);
          rb.ops = requests;
          rb.seconds = ops > 0 ? requests / ops : 0;
          series.push_back(rb);
        }
      }
    }
    if (!opt.batched_only) {
      const double legacy =
          peers.redis->PipelinedGetOps(4 * kKiB, 16, 50, opt.quick ? 100000 : 1000000);
      Series rb{"redis-benchmark GET -P16 -c50", 4 * kKiB, 50};
      rb.ops = 1;
      rb.seconds = legacy > 0 ? 1.0 / legacy : 0;
      series.push_back(rb);
    }
  }
  if (peers.memcached != nullptr) {
    for (uint64_t size : {4 * kKiB, kMiB}) {
      if (opt.batched_only) break;
      for (const bool warm : {false, true}) {
        const std::string suffix = warm ? " warm" : " cold";
        Series put{"memcached uds set" + suffix, size, 1};
        Series get{"memcached uds get" + suffix, size, 1};
        if (RunMemcachedSetGet(peers.memcached->socket(), size, CountFor(size, opt.quick), warm,
                               &put, &get)) {
          series.push_back(std::move(put));
          series.push_back(std::move(get));
        }
      }
    }
    for (int threads : kConcurrency) {
      for (size_t batch : kBatches) {
        RunMemcachedBatched(peers.memcached->socket(), peers.keys_per_thread, batch, threads,
                            passes, &series);
      }
    }
  }
  return series;
}

// The ratios between figures of one round.
std::vector<Ratio> RoundRatios(const std::vector<Series>& series) {
  std::vector<Ratio> ratios;
  auto ratio = [&](const std::string& name, const Series* a, const Series* b, double target,
                   bool ops) {
    if (a && b && (ops ? b->OpsPerSec() : b->GBps()) > 0) {
      ratios.push_back(
          {name, (ops ? a->OpsPerSec() / b->OpsPerSec() : a->GBps() / b->GBps()), target});
    }
  };
  for (uint64_t size : {64 * kKiB, kMiB, 4 * kMiB}) {
    const std::string sz = SizeName(size);
    const double target = size == 64 * kKiB ? 0.5 : size == kMiB ? 0.85 : 0.9;
    const Series* base = FindSeries(series, "memcpy dram (baseline)", size, 1);
    ratio("uds put " + sz + " 1 thread / memcpy", FindSeries(series, "tierkv uds put", size, 1),
          base, 0, false);
    ratio("uds put " + sz + " pipelined 1 thread / memcpy",
          FindSeries(series, "tierkv uds put pipelined", size, 1), base, target, false);
    ratio("uds get " + sz + " 1 thread / memcpy", FindSeries(series, "tierkv uds get", size, 1),
          base, target, false);
  }
  for (uint64_t size : {kMiB, 4 * kMiB}) {
    const std::string sz = SizeName(size);
    for (const char* temp : {" warm", " cold"}) {
      const double target = std::strcmp(temp, " warm") == 0 ? 2.5 : 0;
      ratio("uds put " + sz + " 1 thread / redis SET" + temp,
            FindSeries(series, "tierkv uds put", size, 1),
            FindSeries(series, std::string("redis hiredis uds SET") + temp, size, 1), target,
            false);
      ratio("uds get " + sz + " 1 thread / redis GET" + temp,
            FindSeries(series, "tierkv uds get", size, 1),
            FindSeries(series, std::string("redis hiredis uds GET") + temp, size, 1), target,
            false);
    }
  }
  for (uint64_t size : {4 * kKiB, kMiB}) {
    const std::string sz = SizeName(size);
    ratio("uds put " + sz + " 1 thread / memcached set warm",
          FindSeries(series, "tierkv uds put", size, 1),
          FindSeries(series, "memcached uds set warm", size, 1), 0, false);
    ratio("uds get " + sz + " 1 thread / memcached get warm",
          FindSeries(series, "tierkv uds get", size, 1),
          FindSeries(series, "memcached uds get warm", size, 1), 0, false);
  }
  // Batched 4 KiB lookups against the peers at the same concurrency and depth.
  for (size_t batch : kBatches) {
    const std::string b = std::to_string(batch);
    for (int threads : kConcurrency) {
      const std::string t = std::to_string(threads);
      for (const char* op : {"exist", "get"}) {
        const bool get = std::strcmp(op, "get") == 0;
        const Series* ours =
            FindSeries(series, "tierkv uds batch" + b + " " + op, kBatchValueBytes, threads);
        ratio("batch" + b + " " + op + " x" + t + " / redis-benchmark " + (get ? "GET" : "EXISTS") +
                  " -P" + b + " -c" + t,
              ours,
              FindSeries(series,
                         std::string("redis-benchmark ") + (get ? "GET" : "EXISTS") + " -P" + b,
                         kBatchValueBytes, threads),
              2.0, true);
        ratio("batch" + b + " " + op + " x" + t + " / memcached mg x" + t, ours,
              FindSeries(series, "memcached mg batch" + b + " " + op, kBatchValueBytes, threads),
              2.0, true);
      }
    }
  }
  ratio("batch16 get x1 / redis-benchmark GET -P16 -c50",
        FindSeries(series, "tierkv uds batch16 get", kBatchValueBytes, 1),
        FindSeries(series, "redis-benchmark GET -P16 -c50", 4 * kKiB, 50), 0, true);
  return ratios;
}

int Main(const Options& opt) {
  if (!opt.client_only.empty()) return ClientOnly(opt);
  std::vector<std::string> flags = {"--dram-size", "2560MiB",     "--max-object-bytes",
                                    "16MiB",       "--log-level", "error"};
  if (!opt.server_spin_us.empty()) flags.insert(flags.end(), {"--spin-us", opt.server_spin_us});
  testing::ManagerProcess manager(flags);
  Peers peers;
  peers.keys_per_thread = opt.quick ? 4096 : 16384;
  const int max_threads = *std::max_element(std::begin(kConcurrency), std::end(kConcurrency));
  if (!PreloadBatchKeys(manager.uds(), max_threads, peers.keys_per_thread)) {
    std::fprintf(stderr, "could not store the batched keys\n");
    return 1;
  }
  RedisPeer redis;
  if (redis.ok() && redis.Preload(peers.keys_per_thread * max_threads, kBatchValueBytes)) {
    peers.redis = &redis;
  } else {
    std::fprintf(stderr, "redis-server did not start: Redis comparisons skipped\n");
  }
  MemcachedPeer memcached(2048);
  if (memcached.ok() &&
      PreloadMemcached(memcached.socket(), peers.keys_per_thread * max_threads, kBatchValueBytes)) {
    peers.memcached = &memcached;
  } else {
    std::fprintf(stderr, "memcached did not start: memcached comparisons skipped\n");
  }
  const int rounds = opt.quick ? 1 : 3;
  std::vector<std::vector<Series>> all;
  std::vector<std::vector<Ratio>> all_ratios;
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "round %d of %d\n", r + 1, rounds);
    all.push_back(RunRound(opt, manager, peers));
    all_ratios.push_back(RoundRatios(all.back()));
  }
  const std::vector<Series> series = MedianSeries(all);
  const std::vector<Ratio> ratios = MedianRatios(all_ratios);
  std::printf("%u cores; each figure is the median of %d round(s)\n",
              std::thread::hardware_concurrency(), rounds);
  PrintTable(series);
  PrintRatios(ratios);
  return FinishReport(opt.json, series, ratios, rounds);
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  tierkv::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      opt.json = argv[++i];
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--client-spin-us" && i + 1 < argc) {
      tierkv::bench::SetClientSpinUs(std::stoi(argv[++i]));
    } else if (a == "--lease-reads") {
      tierkv::bench::SetClientLeaseReads(true);
    } else if (a == "--server-spin-us" && i + 1 < argc) {
      opt.server_spin_us = argv[++i];
    } else if (a == "--batched-only") {
      opt.batched_only = true;
    } else if (a == "--client-only" && i + 1 < argc) {
      opt.client_only = argv[++i];
    } else if (a == "--size" && i + 1 < argc) {
      opt.size = std::stoull(argv[++i]);
    } else if (a == "--count" && i + 1 < argc) {
      opt.count = std::stoull(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      opt.threads = std::stoi(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      opt.batch = std::stoull(argv[++i]);
    } else if (a == "--passes" && i + 1 < argc) {
      opt.passes = std::stoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: tierkv_bench [--json PATH] [--quick] [--batched-only] [--client-spin-us US]\n"
          "                    [--server-spin-us US] [--lease-reads]\n"
          "       tierkv_bench --client-only ADDRESS [--size BYTES] [--count N] [--threads T]\n"
          "                    [--batch N [--passes P]]\n");
      return 2;
    }
  }
  return tierkv::bench::Main(opt);
}
