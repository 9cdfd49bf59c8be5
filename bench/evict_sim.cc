// tierkv_evict_sim: the store's eviction on fixed traces, over the real store
// (its eviction code, a DRAM pool, no SSD, no background thread): the baseline
// any other policy is measured against on the same traces.
//
//   tierkv_evict_sim [--slots 2000] [--accesses 400000] [--seed 1] [--json PATH]
//
// Each access is a get of a key; a miss puts the key (4 KiB), evicting as the
// store does when the pool is full. Traces:
//   zipf:      Zipf(0.9) over 4 x the pool's objects;
//   zipf+scan: the same, plus every 10 % of the trace a one-pass scan of
//              2 x the pool's objects, each key new and never read again.
// Reported: the DRAM hit ratio (after a warm-up of one pool's worth of
// accesses; scan accesses not counted), and a static top-k bound (the most
// popular keys always resident).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "store/store.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kObject = 4096;

// Zipf(s) over n ranks by inversion of the cumulative weights.
class Zipf {
 public:
  Zipf(size_t n, double s) : cdf_(n) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) cdf_[i] = (sum += 1.0 / std::pow(double(i + 1), s));
    for (double& c : cdf_) c /= sum;
  }
  size_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }
  double TopMass(size_t k) const { return k == 0 ? 0 : cdf_[std::min(k, cdf_.size()) - 1]; }

 private:
  std::vector<double> cdf_;
};

double Replay(EvictPolicy policy, const std::vector<std::string>& trace, size_t slots,
              size_t warmup) {
  StoreOptions o;
  o.evict_policy = policy;
  o.shards = 16;
  auto pool = DramPool::Create(slots * kObject);
  auto store = Store::Create(o, std::move(*pool));
  Store& s = **store;
  const Caller c(1, 0);
  const std::string value(kObject, 'v');
  uint64_t hits = 0, counted = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const std::string& key = trace[i];
    const bool scan = key[0] == 's';
    Result<LeaseGrant> g = s.Lease(c, {"t", key});
    if (g.ok()) {
      (void)s.Release(c, g->lease_id);
    } else {
      Result<AllocGrant> a = s.Alloc(c, {"t", key}, kObject, {});
      if (a.ok()) {
        std::memcpy(a->data, value.data(), kObject);
        (void)s.Commit(c, a->alloc_id);
      }
    }
    if (i >= warmup && !scan) {
      ++counted;
      hits += g.ok() ? 1 : 0;
    }
  }
  return counted ? double(hits) / double(counted) : 0;
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  using namespace tierkv;
  using namespace tierkv::bench;
  size_t slots = 2000, accesses = 400000;
  uint64_t seed = 1;
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--slots") slots = std::stoul(argv[i + 1]);
    if (a == "--accesses") accesses = std::stoul(argv[i + 1]);
    if (a == "--seed") seed = std::stoull(argv[i + 1]);
    if (a == "--json") json = argv[i + 1];
  }
  // The pool holds a little less than `slots` objects (allocator overhead);
  // the working set is 4 x slots keys.
  const size_t keys = 4 * slots;
  Zipf zipf(keys, 0.9);
  std::mt19937_64 rng(seed);
  std::vector<std::string> plain, scanned;
  size_t scan_no = 0;
  for (size_t i = 0; i < accesses; ++i) {
    const std::string k = "k" + std::to_string(zipf(rng));
    plain.push_back(k);
    scanned.push_back(k);
    if ((i + 1) % (accesses / 10) == 0) {
      for (size_t j = 0; j < 2 * slots; ++j) {
        scanned.push_back("s" + std::to_string(scan_no++));
      }
    }
  }
  std::vector<Ratio> ratios;
  std::printf("%-12s %8s %8s %8s\n", "trace", "lru", "s3fifo", "ratio");
  for (const auto& [name, trace] :
       {std::pair<const char*, const std::vector<std::string>*>{"zipf", &plain},
        {"zipf+scan", &scanned}}) {
    const double lru = Replay(EvictPolicy::kLru, *trace, slots, slots);
    const double s3 = Replay(EvictPolicy::kS3Fifo, *trace, slots, slots);
    std::printf("%-12s %8.3f %8.3f %8.2f\n", name, lru, s3, s3 / lru);
    ratios.push_back({std::string(name) + ": DRAM hit ratio, lru", lru, 0});
    ratios.push_back({std::string(name) + ": DRAM hit ratio, s3fifo", s3, 0});
    ratios.push_back({std::string(name) + ": s3fifo / lru", s3 / lru, 0});
  }
  std::printf("static top-%zu bound on zipf: %.3f\n", slots, zipf.TopMass(slots));
  ratios.push_back({"zipf: static top-k bound", zipf.TopMass(slots), 0});
  if (!json.empty() && !WriteJson(json, {}, ratios)) return 1;
  return 0;
}
