// tierkv_ssd_bench: the SSD tier against the disk it runs on.
//
// In one run, on one directory (--dir, default ./bench-ssd), three rounds of:
//   - the baseline: raw O_DIRECT write, then read, of a freshly preallocated
//     file in 1 MiB and 4 MiB transfers at queue depth 1, 4 and 16 (that many
//     threads, each moving every depth-th transfer), interleaved with tierkv's
//     flush and rewarm of the same size and depth in eight slices;
//   - tierkv flush: a store (DRAM pool + SSD tier on the same directory, the
//     manager's own code) at --ssd-queue-depth 1, 4, 16 demotes objects of that
//     size to SSD (EvictKeys), and tierkv rewarm: batch gets of the cold objects
//     bring them back into DRAM (their rewarms that many at a time);
//   - a mixed workload through a real manager whose working set is 4 x its DRAM:
//     Zipf-distributed gets (with one upsert in ten), reporting the hit ratio by
//     tier and the get GB/s, next to the same workload on a working set that
//     fits in DRAM, and the bound the first one could reach from its own hit
//     ratios and the measured in-DRAM get and rewarm rates.
// Prints the median round of each series and the median of each ratio, writes JSON (--json PATH).
#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "manager_process.h"
#include "media/ssd_blob.h"
#include "store/store.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kMiB = 1 << 20;

struct Options {
  std::string dir = "bench-ssd";
  std::string json = "bench/results/ssd.json";
  bool quick = false;
};

// The baseline's buffer is memory of the kind the store's pool is (a DramPool
// with the manager's huge page advice), so that both sides pin pages of the
// same size whatever the kernel's shmem huge page policy.
struct PoolBuf {
  explicit PoolBuf(size_t n) {
    auto created = DramPool::Create(n, /*huge_pages=*/true);
    if (created.ok()) pool = std::move(*created);
    p = pool ? reinterpret_cast<char*>(pool->base()) : nullptr;
    for (size_t i = 0; p != nullptr && i < n; ++i) p[i] = static_cast<char>(i * 131 + 7);
  }
  std::unique_ptr<DramPool> pool;
  char* p = nullptr;
};

// The baseline: raw O_DIRECT transfers of `chunk` bytes to and from the very
// blocks the store's blobs of that size use in its own SSD file (the value
// part of the k-th extent, `stride` bytes apart), each from (into) its own part
// of a pool-like buffer, as the store's transfers come from (go to) different
// parts of its DRAM pool. On a virtual disk, two regions of one disk can
// differ by half, so any other blocks would make the ratios a matter of
// placement.
class RawRig {
 public:
  RawRig(const std::string& path, uint64_t chunk, uint64_t stride, uint64_t count)
      : chunk_(chunk), stride_(stride), buf_(chunk * count) {
    fd_ = open(path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
    if (fd_ < 0) std::fprintf(stderr, "cannot open %s with O_DIRECT\n", path.c_str());
    if (buf_.p == nullptr) {
      std::fprintf(stderr, "cannot map a %llu-byte buffer\n",
                   static_cast<unsigned long long>(chunk * count));
    }
  }
  ~RawRig() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0 && buf_.p != nullptr; }

  // Moves chunks [begin, end) with `depth` threads, each moving every
  // depth-th chunk, so that many transfers are in flight. Returns the chunks moved.
  uint64_t Move(bool write, uint64_t begin, uint64_t end, int depth) {
    std::atomic<uint64_t> ops{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < depth; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t k = begin + t; k < end; k += depth) {
          char* p = buf_.p + k * chunk_;
          const auto at = static_cast<off_t>(k * stride_ + kBlobHeaderBytes);
          const ssize_t n = write ? pwrite(fd_, p, chunk_, at) : pread(fd_, p, chunk_, at);
          if (n != static_cast<ssize_t>(chunk_)) break;
          ++ops;
        }
      });
    }
    for (auto& th : threads) th.join();
    return ops;
  }

 private:
  uint64_t chunk_;
  uint64_t stride_;
  PoolBuf buf_;
  int fd_ = -1;
};

// Writes `size` bytes of zeros over a new file (O_DIRECT, 8 MiB at a time), so
// that every block the run uses has been written once before: on a virtual
// disk, blocks written for the first time (allocated on the host then) cost
// more than blocks written before, and which blocks those are would otherwise
// decide the ratios. Zeros, so that the SSD tier recovers nothing from it.
bool Precondition(const std::string& path, uint64_t size) {
  constexpr uint64_t kStep = 8 * kMiB;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
  void* zeros = std::aligned_alloc(4096, kStep);
  bool ok = fd >= 0 && zeros != nullptr;
  if (ok) std::memset(zeros, 0, kStep);
  for (uint64_t at = 0; ok && at < size; at += kStep) {
    const size_t n = static_cast<size_t>(std::min(kStep, size - at));
    ok = pwrite(fd, zeros, n, static_cast<off_t>(at)) == static_cast<ssize_t>(n);
  }
  std::free(zeros);
  if (fd >= 0) close(fd);
  if (!ok) std::fprintf(stderr, "cannot write %s with O_DIRECT\n", path.c_str());
  return ok;
}

// The store's own demotion and rewarm paths on a real SSD tier, at SSD queue
// depth `depth`: `total` bytes of `size`-byte objects put, then demoted by
// EvictKeys (groups of `depth` side by side) and brought back by batch leases
// of kRewarmBatch cold keys (their rewarms `depth` at a time), a range of keys
// at a time.
class StoreRig {
 public:
  StoreRig(const std::string& dir, uint64_t size, uint64_t total, bool io_uring, int depth)
      : path_(dir + "/store") {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
    if (!Precondition(file_path(), total + total / 8)) return;
    BlockFileOptions fo;
    fo.use_io_uring = io_uring;
    auto file = OpenBlockFile(file_path(), total + total / 8, fo);
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
      return;
    }
    engine_ = std::string((*file)->engine());
    std::vector<SsdBlob> recovered;
    SsdRecoveryStats stats;
    auto tier = SsdTier::Open(std::move(*file), &recovered, &stats);
    auto pool = DramPool::Create(total + total / 4, /*huge_pages=*/true);  // as the manager asks
    if (!tier.ok() || !pool.ok()) return;
    StoreOptions o;
    o.high_watermark = o.low_watermark = 1.0;  // nothing moves unless asked
    o.ssd_high_watermark = o.ssd_low_watermark = 1.0;
    o.max_object_bytes = 64 * kMiB;
    o.ssd_queue_depth = depth;
    auto store = Store::Create(o, std::move(*pool));
    if (!store.ok() || !(*store)->AttachSsd(std::move(*tier), {}, stats).ok()) return;
    const uint64_t n = total / size;
    for (uint64_t i = 0; i < n; ++i) {
      keys_.push_back("k" + std::to_string(i));
      auto g = (*store)->Alloc({}, {"default", keys_.back()}, size, {});
      if (!g.ok()) return;
      std::memset(g->data, static_cast<int>(i), size);
      if (!(*store)->Commit({}, g->alloc_id).ok()) return;
    }
    store_ = std::move(*store);
  }
  ~StoreRig() {
    store_.reset();
    std::filesystem::remove_all(path_);
  }
  bool ok() const { return store_ != nullptr; }
  const std::string& engine() const { return engine_; }
  std::string file_path() const { return path_ + "/tierkv-ssd.dat"; }
  // How far apart the blobs of `size`-byte values lie in a fresh tier, whose
  // allocator hands out exact footprints from the lowest offset up.
  static uint64_t Stride(uint64_t size) { return BlobFootprint(size); }

  // Demotes keys [begin, end); returns how many moved.
  uint64_t Flush(size_t begin, size_t end) {
    return store_->admin().EvictKeys("default", {keys_.begin() + begin, keys_.begin() + end});
  }
  // Leases (rewarming) and releases keys [begin, end); returns how many came back.
  uint64_t Rewarm(size_t begin, size_t end) {
    constexpr size_t kRewarmBatch = 64;
    uint64_t ops = 0;
    for (size_t at = begin; at < end; at += kRewarmBatch) {
      std::vector<std::string_view> batch(keys_.begin() + at,
                                          keys_.begin() + std::min(end, at + kRewarmBatch));
      for (const auto& l : store_->BatchLease({}, "default", batch)) {
        if (l.ok() && store_->Release({}, l->lease_id).ok()) ++ops;
      }
    }
    return ops;
  }

 private:
  std::string path_;
  std::string engine_;
  std::vector<std::string> keys_;
  std::unique_ptr<Store> store_;
};

// Adds the time and the ops of `fn` to `s`.
template <typename Fn>
void Timed(Series* s, Fn&& fn) {
  const double t0 = NowSeconds();
  s->ops += fn();
  s->seconds += NowSeconds() - t0;
}

// The baseline and tierkv at one object size and depth, interleaved in
// kSlices slices so that the disk's drift during the run (large on a virtual
// disk) falls on both alike: each slice's raw write, then its tierkv flush
// over the same blocks; then each slice's raw read and tierkv rewarm of those
// blocks, in alternating order.
void DepthPair(const std::string& dir, uint64_t size, uint64_t total, int depth,
               std::vector<Series>* out) {
  constexpr uint64_t kSlices = 8;
  StoreRig store(dir, size, total, /*io_uring=*/true, depth);
  if (!store.ok()) return;
  RawRig raw(store.file_path(), size, StoreRig::Stride(size), total / size);
  if (!raw.ok()) return;
  Series raw_w{"raw O_DIRECT write (baseline)", size, depth};
  Series raw_r{"raw O_DIRECT read (baseline)", size, depth};
  Series flush{"tierkv flush (" + store.engine() + ")", size, depth};
  Series rewarm{"tierkv rewarm (" + store.engine() + ")", size, depth};
  const uint64_t per = total / size / kSlices;  // objects per slice
  for (const bool writes : {true, false}) {
    for (uint64_t i = 0; i < kSlices; ++i) {
      const uint64_t begin = i * per, end = begin + per;
      auto run_raw = [&] {
        Timed(writes ? &raw_w : &raw_r, [&] { return raw.Move(writes, begin, end, depth); });
      };
      auto run_store = [&] {
        Timed(writes ? &flush : &rewarm,
              [&] { return writes ? store.Flush(begin, end) : store.Rewarm(begin, end); });
      };
      // The raw writes go first: after the flush, those blocks are the
      // store's blobs. The reads alternate.
      if (writes || i % 2 == 0) {
        run_raw();
        run_store();
      } else {
        run_store();
        run_raw();
      }
    }
  }
  for (Series* s : {&raw_w, &raw_r, &flush, &rewarm}) out->push_back(std::move(*s));
}

// The store's flush and rewarm alone (the pread engine, for reference).
void StoreAlone(const std::string& dir, uint64_t size, uint64_t total, bool io_uring, int depth,
                std::vector<Series>* out) {
  StoreRig store(dir, size, total, io_uring, depth);
  if (!store.ok()) return;
  const size_t n = total / size;
  Series flush{"tierkv flush (" + store.engine() + ")", size, depth};
  Series rewarm{"tierkv rewarm (" + store.engine() + ")", size, depth};
  Timed(&flush, [&] { return store.Flush(0, n); });
  Timed(&rewarm, [&] { return store.Rewarm(0, n); });
  out->push_back(std::move(flush));
  out->push_back(std::move(rewarm));
}

int64_t Metric(const std::string& body, const std::string& name) {
  const size_t at = body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(body.substr(at + name.size() + 2));
}

struct MixedResult {
  double hit_dram = 0, hit_ssd = 0, miss = 0;
};

// Zipf(0.9) gets over `keys` objects of `size` bytes, one upsert in ten.
MixedResult Mixed(const std::string& dir, uint64_t dram, uint64_t keys, uint64_t size, uint64_t ops,
                  const std::string& name, std::vector<Series>* out,
                  const std::string& policy = "s3fifo") {
  std::filesystem::remove_all(dir + "/mixed");
  testing::ManagerProcess m({"--dram-size", std::to_string(dram / kMiB) + "MiB", "--ssd-dir",
                             dir + "/mixed", "--ssd-size", std::to_string(keys * 2) + "MiB",
                             "--log-level", "error", "--evict-policy", policy});
  MixedResult r;
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return r;
  const std::string value(size, 'v');
  for (uint64_t i = 0; i < keys; ++i) (void)(*c)->Put("k" + std::to_string(i), value);
  std::vector<double> cdf(keys);
  double sum = 0;
  for (uint64_t i = 0; i < keys; ++i) cdf[i] = (sum += 1.0 / std::pow(i + 1.0, 0.9));
  std::mt19937_64 gen(42);
  std::uniform_real_distribution<double> u(0, sum);
  httplib::Client http(m.rest());
  auto before = http.Get("/metrics");
  std::vector<char> buf(size);
  Series get{name, size, 1};
  double busy = 0;
  for (uint64_t i = 0; i < ops; ++i) {
    const uint64_t k = std::lower_bound(cdf.begin(), cdf.end(), u(gen)) - cdf.begin();
    const std::string key = "k" + std::to_string(k);
    if (i % 10 == 9) {
      (void)(*c)->Upsert(key, value);
      continue;
    }
    const double t0 = NowSeconds();
    auto n = (*c)->Get(key, buf.data(), buf.size());
    busy += NowSeconds() - t0;
    if (n.ok()) ++get.ops;
  }
  get.seconds = busy;
  auto after = http.Get("/metrics");
  if (before && after) {
    auto delta = [&](const char* f) {
      return double(Metric(after->body, f) - Metric(before->body, f));
    };
    const double dram_hits = delta("memcache_get_hits_dram_total");
    const double ssd_hits = delta("memcache_get_hits_ssd_total");
    const double total = double(ops - ops / 10);
    r = {dram_hits / total, ssd_hits / total, 1 - (dram_hits + ssd_hits) / total};
  }
  out->push_back(std::move(get));
  return r;
}

constexpr int kDepths[] = {1, 4, 16};

// Flush and rewarm (io_uring) against raw O_DIRECT at the same depth, one round.
std::vector<Ratio> DepthRatios(const std::vector<Series>& runs) {
  std::vector<Ratio> ratios;
  for (uint64_t size : {kMiB, 4 * kMiB}) {
    const std::string sz = SizeName(size);
    for (int depth : kDepths) {
      const std::string qd = " qd" + std::to_string(depth);
      const Series* w = FindSeries(runs, "raw O_DIRECT write (baseline)", size, depth);
      const Series* r = FindSeries(runs, "raw O_DIRECT read (baseline)", size, depth);
      const Series* f = FindSeries(runs, "tierkv flush (io_uring)", size, depth);
      const Series* g = FindSeries(runs, "tierkv rewarm (io_uring)", size, depth);
      if (w && f && w->GBps() > 0)
        ratios.push_back({"flush " + sz + qd + " / raw write" + qd, f->GBps() / w->GBps(), 0.9});
      if (r && g && r->GBps() > 0)
        ratios.push_back({"rewarm " + sz + qd + " / raw read" + qd, g->GBps() / r->GBps(), 0.9});
    }
  }
  return ratios;
}

int Main(const Options& opt) {
  std::filesystem::create_directories(opt.dir);
  std::vector<Series> series;
  std::vector<Ratio> ratios;
  const uint64_t total = (opt.quick ? 256 : 1024) * kMiB;
  // Each figure is the median of three rounds, the baseline's runs interleaved
  // with tierkv's so that drift of the disk affects both alike. Ratios are
  // taken within a round, then their median is reported.
  constexpr int kRounds = 3;
  std::vector<std::vector<Series>> rounds(kRounds);
  std::vector<std::vector<Ratio>> round_ratios(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<Series>& runs = rounds[round];
    for (uint64_t size : {kMiB, 4 * kMiB}) {
      for (int depth : kDepths) DepthPair(opt.dir, size, total, depth, &runs);
      StoreAlone(opt.dir, size, total, /*io_uring=*/false, 1, &runs);
    }
    round_ratios[round] = DepthRatios(runs);
    // The mixed workloads, with a bound from this round's own figures.
    const uint64_t dram = 256 * kMiB;
    const uint64_t ops = opt.quick ? 3000 : 8000;
    const MixedResult cold =
        Mixed(opt.dir, dram, 4 * dram / kMiB, kMiB, ops, "mixed get, working set 4 x DRAM", &runs);
    const MixedResult cold_lru = Mixed(opt.dir, dram, 4 * dram / kMiB, kMiB, ops,
                                       "mixed get (lru), working set 4 x DRAM", &runs, "lru");
    const MixedResult warm = Mixed(opt.dir, dram, dram / kMiB / 2, kMiB, ops,
                                   "mixed get, working set 0.5 x DRAM", &runs);
    std::filesystem::remove_all(opt.dir + "/mixed");
    std::vector<Ratio>& rr = round_ratios[round];
    rr.push_back({"4xDRAM: get hit ratio DRAM", cold.hit_dram, 0});
    rr.push_back({"4xDRAM: get hit ratio DRAM, lru", cold_lru.hit_dram, 0});
    rr.push_back({"4xDRAM: get hit ratio SSD", cold.hit_ssd, 0});
    rr.push_back({"4xDRAM: get miss ratio", cold.miss, 0});
    rr.push_back({"0.5xDRAM: get hit ratio DRAM", warm.hit_dram, 0});
    const Series* mc = FindSeries(runs, "mixed get, working set 4 x DRAM", kMiB, 1);
    const Series* mw = FindSeries(runs, "mixed get, working set 0.5 x DRAM", kMiB, 1);
    const Series* rw = FindSeries(runs, "tierkv rewarm (io_uring)", kMiB, 1);
    if (mc && mw && rw && mw->GBps() > 0 && rw->GBps() > 0) {
      rr.push_back({"4xDRAM get GB/s / in-DRAM get GB/s", mc->GBps() / mw->GBps(), 0});
      // A get served from DRAM costs what an in-DRAM get costs; one served from
      // SSD costs a rewarm (qd 1) and then the same. Per byte of a hit:
      const double hits = cold.hit_dram + cold.hit_ssd;
      if (hits > 0) {
        const double per_byte =
            (cold.hit_dram / mw->GBps() + cold.hit_ssd * (1 / rw->GBps() + 1 / mw->GBps())) / hits;
        const double bound = 1 / per_byte;
        rr.push_back({"4xDRAM: bound from hit ratios and rates, GB/s", bound, 0});
        rr.push_back({"4xDRAM get GB/s / that bound", mc->GBps() / bound, 0.8});
      }
    }
  }
  series = MedianSeries(rounds);
  ratios = MedianRatios(round_ratios);
  PrintTable(series);
  PrintRatios(ratios);
  return FinishReport(opt.json, series, ratios, kRounds);
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  tierkv::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      opt.dir = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      opt.json = argv[++i];
    } else if (a == "--quick") {
      opt.quick = true;
    } else {
      std::fprintf(stderr, "usage: tierkv_ssd_bench [--dir DIR] [--json PATH] [--quick]\n");
      return 2;
    }
  }
  return tierkv::bench::Main(opt);
}
