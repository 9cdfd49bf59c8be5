// tierkv_bench: the side-by-side benchmark of issue "standalone manager".
//
// In one run it measures
//   - the baseline: single-thread memcpy between different slots of two large
//     buffers (so every copy comes from DRAM, not from cache);
//   - tierkv put and get (GB/s, ops/s, p50/p99) for 4 KiB .. 4 MiB objects with
//     1 and 2 client threads, over the Unix socket (shared memory) and TCP;
//   - batched 4 KiB exist and get (keys/s);
//   - redis-server on a Unix socket driven by hiredis with the same sizes, and
//     redis-benchmark pipelined GET (-P 16) for small ops;
// then prints a table and the headline ratios and writes JSON (--json PATH).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "manager_process.h"
#include "redis_peer.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kSlab = 256 * kMiB;  // rotating source / destination area per thread

struct Options {
  std::string json = "bench/results/latest.json";
  bool quick = false;
  // --client-only ADDRESS: measure only 1-thread put/get of --size bytes against
  // a running manager and print the two series as JSON (for bench/python_bench.py).
  std::string client_only;
  uint64_t size = 1 << 20;
  uint64_t count = 512;
};

// A large, pre-faulted buffer whose slots rotate so copies miss the cache.
class Slab {
 public:
  Slab() {
    void* p = mmap(nullptr, kSlab, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    base_ = static_cast<char*>(p);
    for (uint64_t i = 0; i < kSlab; i += 4096) base_[i] = static_cast<char>(i >> 12);
  }
  ~Slab() { munmap(base_, kSlab); }
  char* Slot(uint64_t i, uint64_t size) const {
    const uint64_t slots = kSlab / size;
    return base_ + (i % slots) * size;
  }

 private:
  char* base_ = nullptr;
};

uint64_t CountFor(uint64_t size, bool quick) {
  const uint64_t budget = (quick ? 64 : 512) * kMiB;
  return std::clamp<uint64_t>(budget / size, 64, quick ? 2000 : 20000);
}

Series MemcpyBaseline(uint64_t size, uint64_t count) {
  Slab src, dst;
  Series s{"memcpy dram (baseline)", size, 1};
  const double t0 = NowSeconds();
  for (uint64_t i = 0; i < count; ++i) {
    const double a = NowSeconds();
    std::memcpy(dst.Slot(i * 7 + 3, size), src.Slot(i, size), size);
    s.latencies.push_back(NowSeconds() - a);
  }
  s.seconds = NowSeconds() - t0;
  s.ops = count;
  return s;
}

// `threads` clients, each putting then getting `count` objects of `size`.
void RunTierkv(const std::string& address, const std::string& label, uint64_t size, uint64_t count,
               int threads, std::vector<Series>* out) {
  Series put{"tierkv " + label + " put", size, threads};
  Series get{"tierkv " + label + " get", size, threads};
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<Slab>> slabs;
  for (int t = 0; t < threads; ++t) {
    auto c = Client::Connect(address);
    if (!c.ok()) {
      std::fprintf(stderr, "connect %s: %s\n", address.c_str(), c.status().ToString().c_str());
      return;
    }
    clients.push_back(std::move(*c));
    slabs.push_back(std::make_unique<Slab>());
  }
  std::vector<std::vector<double>> lat(threads);
  std::vector<uint64_t> errors(threads, 0);
  auto phase = [&](bool is_put, Series* series) {
    std::vector<std::thread> ts;
    const double t0 = NowSeconds();
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        lat[t].clear();
        Client& c = *clients[t];
        for (uint64_t i = 0; i < count; ++i) {
          const std::string key = "b/" + std::to_string(t) + "/" + std::to_string(i);
          char* slot = slabs[t]->Slot(i, size);
          const double a = NowSeconds();
          bool ok;
          if (is_put) {
            ok = c.Put(key, slot, size).ok();
          } else {
            ok = c.Get(key, slot, size).ok();
          }
          lat[t].push_back(NowSeconds() - a);
          errors[t] += ok ? 0 : 1;
        }
      });
    }
    for (auto& th : ts) th.join();
    series->seconds = NowSeconds() - t0;
    series->ops = count * threads;
    for (auto& l : lat) series->latencies.insert(series->latencies.end(), l.begin(), l.end());
  };
  phase(true, &put);
  phase(false, &get);
  uint64_t total_errors = 0;
  for (uint64_t e : errors) total_errors += e;
  if (total_errors > 0)
    std::fprintf(stderr, "%s: %llu errors\n", label.c_str(),
                 static_cast<unsigned long long>(total_errors));
  (void)clients[0]->RemoveAll(kDefaultTenant, /*force=*/true);
  out->push_back(std::move(put));
  out->push_back(std::move(get));
}

// Batched small ops: `count` 4 KiB objects, then batch exist and batch get of
// `batch` keys per call. Ops are keys per second.
void RunBatched(const std::string& address, uint64_t count, size_t batch, int threads,
                std::vector<Series>* out) {
  constexpr uint64_t kSize = 4 * kKiB;
  std::vector<std::unique_ptr<Client>> clients;
  for (int t = 0; t < threads; ++t) {
    auto c = Client::Connect(address);
    if (!c.ok()) return;
    clients.push_back(std::move(c).value());
  }
  std::vector<std::vector<std::string>> keys(threads);
  const std::string value(kSize, 'v');
  for (int t = 0; t < threads; ++t) {
    std::vector<PutItem> items;
    for (uint64_t i = 0; i < count; ++i)
      keys[t].push_back("s/" + std::to_string(t) + "/" + std::to_string(i));
    for (const auto& k : keys[t]) items.push_back({k, value.data(), kSize, {}});
    (void)clients[t]->BatchPut(items);
  }
  for (int mode = 0; mode < 2; ++mode) {
    Series s{std::string("tierkv uds batch") + std::to_string(batch) + (mode ? " get" : " exist"),
             kSize, threads};
    std::vector<std::vector<double>> lat(threads);
    std::vector<std::thread> ts;
    const double t0 = NowSeconds();
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        std::vector<std::string> bufs(batch, std::string(kSize, '\0'));
        for (uint64_t i = 0; i + batch <= count; i += batch) {
          std::vector<std::string_view> views(keys[t].begin() + i, keys[t].begin() + i + batch);
          const double a = NowSeconds();
          if (mode == 0) {
            (void)clients[t]->BatchExist(views);
          } else {
            std::vector<GetItem> items;
            for (size_t j = 0; j < batch; ++j) items.push_back({views[j], bufs[j].data(), kSize});
            (void)clients[t]->BatchGet(items);
          }
          lat[t].push_back(NowSeconds() - a);
        }
      });
    }
    for (auto& th : ts) th.join();
    s.seconds = NowSeconds() - t0;
    s.ops = (count / batch) * batch * threads;
    for (auto& l : lat) s.latencies.insert(s.latencies.end(), l.begin(), l.end());
    out->push_back(std::move(s));
  }
  (void)clients[0]->RemoveAll(kDefaultTenant, true);
}

const Series* Find(const std::vector<Series>& all, const std::string& name, uint64_t size,
                   int threads) {
  for (const Series& s : all) {
    if (s.name == name && s.object_bytes == size && s.threads == threads) return &s;
  }
  return nullptr;
}

int ClientOnly(const Options& opt) {
  std::vector<Series> series;
  RunTierkv(opt.client_only, "client", opt.size, opt.count, 1, &series);
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

int Main(const Options& opt) {
  if (!opt.client_only.empty()) return ClientOnly(opt);
  std::vector<Series> series;
  std::vector<Ratio> ratios;
  const std::vector<uint64_t> sizes = {4 * kKiB, 64 * kKiB, kMiB, 4 * kMiB};

  for (uint64_t size : sizes) series.push_back(MemcpyBaseline(size, CountFor(size, opt.quick)));

  testing::ManagerProcess manager(
      {"--dram-size", "2560MiB", "--max-object-bytes", "16MiB", "--log-level", "error"});
  for (const bool uds : {true, false}) {
    for (uint64_t size : sizes) {
      for (int threads : {1, 2}) {
        RunTierkv(uds ? manager.uds() : manager.tcp(), uds ? "uds" : "tcp", size,
                  CountFor(size, opt.quick), threads, &series);
      }
    }
  }
  const uint64_t small_count = opt.quick ? 20000 : 100000;
  for (int threads : {1, 2}) RunBatched(manager.uds(), small_count, 16, threads, &series);
  RunBatched(manager.uds(), small_count, 128, 1, &series);

  RedisPeer redis;
  double redis_pipelined = 0;
  if (redis.ok()) {
    for (uint64_t size : sizes) {
      Series put{"redis hiredis uds SET", size, 1};
      Series get{"redis hiredis uds GET", size, 1};
      if (redis.RunSetGet(size, CountFor(size, opt.quick), &put, &get)) {
        series.push_back(std::move(put));
        series.push_back(std::move(get));
      }
    }
    redis_pipelined = redis.PipelinedGetOps(4 * kKiB, 16, 50, opt.quick ? 100000 : 1000000);
    Series rb{"redis-benchmark GET -P16 -c50", 4 * kKiB, 50};
    rb.ops = 1;
    rb.seconds = redis_pipelined > 0 ? 1.0 / redis_pipelined : 0;
    series.push_back(rb);
  } else {
    std::fprintf(stderr, "redis-server did not start: Redis comparisons skipped\n");
  }

  PrintTable(series);
  auto ratio = [&](const std::string& name, const Series* a, const Series* b, double target,
                   bool ops) {
    if (a && b && (ops ? b->OpsPerSec() : b->GBps()) > 0) {
      ratios.push_back(
          {name, (ops ? a->OpsPerSec() / b->OpsPerSec() : a->GBps() / b->GBps()), target});
    }
  };
  for (uint64_t size : {kMiB, 4 * kMiB}) {
    const std::string sz = SizeName(size);
    const Series* base = Find(series, "memcpy dram (baseline)", size, 1);
    ratio("uds put " + sz + " 1 thread / memcpy", Find(series, "tierkv uds put", size, 1), base,
          0.8, false);
    ratio("uds get " + sz + " 1 thread / memcpy", Find(series, "tierkv uds get", size, 1), base,
          0.8, false);
    ratio("uds put " + sz + " 1 thread / redis SET", Find(series, "tierkv uds put", size, 1),
          Find(series, "redis hiredis uds SET", size, 1), 2.5, false);
    ratio("uds get " + sz + " 1 thread / redis GET", Find(series, "tierkv uds get", size, 1),
          Find(series, "redis hiredis uds GET", size, 1), 2.5, false);
  }
  const Series* rb = Find(series, "redis-benchmark GET -P16 -c50", 4 * kKiB, 50);
  for (const char* name : {"tierkv uds batch16 exist", "tierkv uds batch16 get"}) {
    for (int threads : {1, 2}) {
      ratio(std::string(name).substr(11) + " 4KiB " + std::to_string(threads) +
                "t / redis-benchmark -P16",
            Find(series, name, 4 * kKiB, threads), rb, 2.0, true);
    }
  }
  ratio("uds batch128 get 4KiB 1t / redis-benchmark -P16",
        Find(series, "tierkv uds batch128 get", 4 * kKiB, 1), rb, 0, true);
  PrintRatios(ratios);
  return FinishReport(opt.json, series, ratios);
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
    } else if (a == "--client-only" && i + 1 < argc) {
      opt.client_only = argv[++i];
    } else if (a == "--size" && i + 1 < argc) {
      opt.size = std::stoull(argv[++i]);
    } else if (a == "--count" && i + 1 < argc) {
      opt.count = std::stoull(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_bench [--json PATH] [--quick]\n"
                   "       tierkv_bench --client-only ADDRESS [--size BYTES] [--count N]\n");
      return 2;
    }
  }
  return tierkv::bench::Main(opt);
}
