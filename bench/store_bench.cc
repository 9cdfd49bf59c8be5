// tierkv_store_bench: the store's change feed, measured in-process.
//
//   tierkv_store_bench [--objects 1000000] [--rounds 5] [--json PATH] [--lookups-only]
//
// 1. Feed cost: one thread's put (alloc + copy + commit) and get (lease + copy +
//    release) of 4 KiB and 1 MiB values on a store with no observer and no
//    journal (the baseline) and on one with a 16 MiB journal and an observer
//    attached; rounds alternate and the medians are compared.
// 2. Snapshot: `--objects` objects, then Store::Snapshot pages through them while
//    a thread keeps putting; reports the snapshot's time and the put rate during
//    it against the same thread's rate with no snapshot running.
// 3. The same through a manager, as `make bench` sees it: one C++ client's
//    4 KiB and 1 MiB upserts and 1 MiB gets over the Unix socket against a
//    standalone manager (no journal) and against a cluster member with no peers
//    (a real etcd; its store journals every change in 16 MiB), rounds alternating
//    which goes first; the median of the rounds' ratios is reported.
// 4. Batched lookups: nanoseconds per key of BatchExist, and of BatchLease with
//    its BatchRelease, over 262144 stored 4 KiB objects (the keys and tenant of
//    `make bench`'s batched series), 16 and 128 keys per call, one thread;
//    the median of the rounds.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "cluster_member.h"
#include "etcd_process.h"
#include "manager_process.h"
#include "store/store.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class CountingObserver : public ReplicaObserver {
 public:
  void OnStored(const ReplicaEvent&) override { n.fetch_add(1, std::memory_order_relaxed); }
  void OnRemoved(const ReplicaEvent&) override { n.fetch_add(1, std::memory_order_relaxed); }
  void OnTenantCleared(std::string_view) override {}
  std::atomic<uint64_t> n{0};
};

std::unique_ptr<Store> MakeStore(uint64_t pool, size_t journal, ReplicaObserver* obs) {
  StoreOptions o;
  o.journal_bytes = journal;
  o.max_object_bytes = 16 * kMiB;
  auto p = DramPool::Create(pool);
  if (!p.ok()) return nullptr;
  auto s = Store::Create(o, std::move(*p));
  if (!s.ok()) return nullptr;
  if (obs != nullptr) (*s)->AddObserver(obs);
  return std::move(*s);
}

// GB/s of `count` upserts then `count` gets over 32 keys of `size` bytes.
std::pair<double, double> PutGet(Store& st, uint64_t size, uint64_t count) {
  std::vector<char> src(size, 'x'), dst(size);
  std::vector<std::string> keys;
  for (int i = 0; i < 32; ++i) keys.push_back("k" + std::to_string(i));
  double t0 = NowSeconds();
  for (uint64_t i = 0; i < count; ++i) {
    auto g = st.Alloc({}, {"default", keys[i % keys.size()]}, size, {"", true});
    if (!g.ok()) continue;
    std::memcpy(g->data, src.data(), size);
    (void)st.Commit({}, g->alloc_id);
  }
  const double put = count * double(size) / (NowSeconds() - t0) / 1e9;
  t0 = NowSeconds();
  for (uint64_t i = 0; i < count; ++i) {
    auto l = st.Lease({}, {"default", keys[i % keys.size()]});
    if (!l.ok()) continue;
    std::memcpy(dst.data(), l->data, size);
    (void)st.Release({}, l->lease_id);
  }
  const double get = count * double(size) / (NowSeconds() - t0) / 1e9;
  return {put, get};
}

void FeedCost(int rounds, std::vector<Ratio>* ratios) {
  for (uint64_t size : {uint64_t{4096}, kMiB}) {
    const uint64_t count = size == 4096 ? 400000 : 4000;
    std::vector<double> base_put, base_get, feed_put, feed_get;
    for (int r = 0; r < rounds; ++r) {
      {
        auto st = MakeStore(256 * kMiB, 0, nullptr);
        auto [p, g] = PutGet(*st, size, count);
        base_put.push_back(p);
        base_get.push_back(g);
      }
      {
        CountingObserver obs;
        auto st = MakeStore(256 * kMiB, 16 * kMiB, &obs);
        auto [p, g] = PutGet(*st, size, count);
        feed_put.push_back(p);
        feed_get.push_back(g);
      }
    }
    const std::string sz = size == 4096 ? "4KiB" : "1MiB";
    std::printf("%s put: detached %.3f GB/s, feed %.3f GB/s; get: detached %.3f, feed %.3f\n",
                sz.c_str(), Median(base_put), Median(feed_put), Median(base_get), Median(feed_get));
    ratios->push_back(
        {"store put " + sz + " feed on / detached", Median(feed_put) / Median(base_put), 0.97});
    ratios->push_back(
        {"store get " + sz + " feed on / detached", Median(feed_get) / Median(base_get), 0.97});
  }
}

void SnapshotUnderPuts(uint64_t objects, std::vector<Ratio>* ratios) {
  auto st = MakeStore(objects * 4096 + 256 * kMiB, 16 * kMiB, nullptr);
  if (!st) return;
  for (uint64_t i = 0; i < objects; ++i) {
    auto g = st->Alloc({}, {"default", "o" + std::to_string(i)}, 64, {});
    if (g.ok()) (void)st->Commit({}, g->alloc_id);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts{0};
  std::thread writer([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      auto g = st->Alloc({}, {"default", "w" + std::to_string(i % 4096)}, 64, {"", true});
      if (g.ok() && st->Commit({}, g->alloc_id).ok()) puts.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The writer alone for a moment, then with the snapshot running.
  const uint64_t p0 = puts.load();
  const double t0 = NowSeconds();
  while (NowSeconds() - t0 < 0.5) std::this_thread::yield();
  const double alone_rate = (puts.load() - p0) / (NowSeconds() - t0);
  uint64_t records = 0;
  const uint64_t p1 = puts.load();
  const double t1 = NowSeconds();
  const uint64_t watermark = st->admin().Snapshot(
      1024, [&](std::span<const SnapshotRecord> page) { records += page.size(); });
  const double secs = NowSeconds() - t1;
  const double during_rate = (puts.load() - p1) / secs;
  stop = true;
  writer.join();
  std::printf(
      "snapshot: %llu records in %.3f s (watermark %llu); concurrent puts %.0f/s during, "
      "%.0f/s alone\n",
      static_cast<unsigned long long>(records), secs, static_cast<unsigned long long>(watermark),
      during_rate, alone_rate);
  std::printf("snapshot target: under 2 s for 1 M objects: %s\n", secs < 2.0 ? "met" : "NOT met");
  ratios->push_back({"puts during snapshot / alone", during_rate / alone_rate, 0});
}

// GB/s of one client's upserts of `size` bytes over 32 keys, then its gets.
std::pair<double, double> ClientPutGet(const testing::ManagerProcess& m, uint64_t size,
                                       uint64_t count) {
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return {0, 0};
  std::vector<char> src(size, 'x'), dst(size);
  std::vector<std::string> keys;
  for (int i = 0; i < 32; ++i) keys.push_back("m" + std::to_string(i));
  for (const auto& k : keys) (void)(*c)->Upsert(k, src.data(), size);  // warm the slots
  double t0 = NowSeconds();
  for (uint64_t i = 0; i < count; ++i) (void)(*c)->Upsert(keys[i % 32], src.data(), size);
  const double put = count * double(size) / (NowSeconds() - t0) / 1e9;
  t0 = NowSeconds();
  for (uint64_t i = 0; i < count; ++i) (void)(*c)->Get(keys[i % 32], dst.data(), size);
  const double get = count * double(size) / (NowSeconds() - t0) / 1e9;
  return {put, get};
}

void ThroughManagers(int rounds, std::vector<Ratio>* ratios) {
  testing::EtcdCluster etcd(1);
  testing::ManagerProcess standalone({"--dram-size", "512MiB"});
  auto member =
      StartMember(etcd, "sbench" + std::to_string(getpid()), "feed", {"--dram-size", "512MiB"});
  for (uint64_t size : {uint64_t{4096}, kMiB}) {
    const uint64_t count = size == 4096 ? 20000 : 800;
    std::vector<double> base_put, base_get, feed_put, feed_get, put_ratio, get_ratio;
    for (int r = 0; r < rounds; ++r) {
      // Alternate which manager goes first, so a drift of the machine's speed
      // within a round favours neither; each round's ratio is taken on its own.
      std::pair<double, double> b, f;
      if (r % 2 == 0) {
        b = ClientPutGet(standalone, size, count);
        f = ClientPutGet(*member, size, count);
      } else {
        f = ClientPutGet(*member, size, count);
        b = ClientPutGet(standalone, size, count);
      }
      base_put.push_back(b.first);
      base_get.push_back(b.second);
      feed_put.push_back(f.first);
      feed_get.push_back(f.second);
      put_ratio.push_back(f.first / b.first);
      get_ratio.push_back(f.second / b.second);
    }
    const std::string sz = SizeName(size);
    std::printf(
        "manager %s put: standalone %.3f GB/s, journaled %.3f GB/s; get: standalone %.3f, "
        "journaled %.3f\n",
        sz.c_str(), Median(base_put), Median(feed_put), Median(base_get), Median(feed_get));
    ratios->push_back({"manager put " + sz + " journaled / standalone", Median(put_ratio), 0.97});
    ratios->push_back({"manager get " + sz + " journaled / standalone", Median(get_ratio), 0.97});
  }
}

// ns per key of `batch`-key calls over `keys`, each key once per pass.
double NsPerKey(const std::vector<std::string>& keys, size_t batch, int passes,
                const std::function<void(std::span<const std::string_view>)>& call) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  const double t0 = NowSeconds();
  for (int p = 0; p < passes; ++p) {
    for (size_t i = 0; i + batch <= views.size(); i += batch) {
      call(std::span<const std::string_view>(views).subspan(i, batch));
    }
  }
  return (NowSeconds() - t0) * 1e9 / (double(passes) * (views.size() / batch * batch));
}

void BatchedLookups(int rounds, std::vector<Ratio>* ratios) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 65536;
  auto st = MakeStore(kThreads * kPerThread * 4096 + 256 * kMiB, 0, nullptr);
  if (!st) return;
  std::vector<std::string> keys;
  for (int t = 0; t < kThreads; ++t) {
    for (uint64_t i = 0; i < kPerThread; ++i) {
      keys.push_back("s/" + std::to_string(t) + "/" + std::to_string(i));
      auto g = st->Alloc({}, {"batch", keys.back()}, 4096, {});
      if (g.ok()) (void)st->Commit({}, g->alloc_id);
    }
  }
  const Caller caller(1, 0);
  for (size_t batch : {size_t{16}, size_t{128}}) {
    std::vector<double> exist, lease;
    uint64_t misses = 0;
    for (int r = 0; r < rounds; ++r) {
      exist.push_back(NsPerKey(keys, batch, 2, [&](std::span<const std::string_view> k) {
        for (const Status& s : st->BatchExist(caller, "batch", k)) misses += s.ok() ? 0 : 1;
      }));
      lease.push_back(NsPerKey(keys, batch, 2, [&](std::span<const std::string_view> k) {
        std::vector<uint64_t> ids;
        for (const auto& l : st->BatchLease(caller, "batch", k)) {
          if (l.ok()) {
            ids.push_back(l->lease_id);
          } else {
            ++misses;
          }
        }
        (void)st->BatchRelease(caller, ids);
      }));
    }
    const std::string b = std::to_string(batch);
    std::printf(
        "batched lookups, %zu keys per call: exist %.0f ns/key, lease+release %.0f ns/key%s\n",
        batch, Median(exist), Median(lease), misses ? " (MISSES)" : "");
    ratios->push_back({"store batch" + b + " exist ns/key", Median(exist), 0});
    ratios->push_back({"store batch" + b + " lease+release ns/key", Median(lease), 0});
  }
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  uint64_t objects = 1000000;
  int rounds = 5;
  std::string json;
  bool lookups_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--lookups-only") {
      lookups_only = true;
    } else if (a == "--objects" && i + 1 < argc) {
      objects = std::stoull(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::stoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_store_bench [--objects N] [--rounds R] [--json PATH] "
                   "[--lookups-only]\n");
      return 2;
    }
  }
  std::vector<tierkv::bench::Ratio> ratios;
  if (lookups_only) {
    tierkv::bench::BatchedLookups(rounds, &ratios);
    tierkv::bench::PrintRatios(ratios);
    return 0;
  }
  tierkv::bench::FeedCost(rounds, &ratios);
  tierkv::bench::SnapshotUnderPuts(objects, &ratios);
  tierkv::bench::ThroughManagers(rounds, &ratios);
  tierkv::bench::BatchedLookups(rounds, &ratios);
  tierkv::bench::PrintRatios(ratios);
  if (!json.empty() && !tierkv::bench::WriteJson(json, {}, ratios)) return 1;
  return 0;
}
