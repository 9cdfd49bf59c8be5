#include "bench_runs.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "memcached_peer.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kSlab = 256 * kMiB;  // rotating source / destination area per thread
constexpr std::string_view kBatchTenant = "batch";

// Runs body(t, latencies) on `threads` threads and fills the series' time,
// ops (ops_per_thread each) and latencies.
void Timed(int threads, uint64_t ops_per_thread, Series* s,
           const std::function<void(int, std::vector<double>*)>& body) {
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::thread> ts;
  const double t0 = NowSeconds();
  for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { body(t, &lat[t]); });
  for (auto& th : ts) th.join();
  s->seconds = NowSeconds() - t0;
  s->ops = ops_per_thread * threads;
  for (auto& l : lat) s->latencies.insert(s->latencies.end(), l.begin(), l.end());
}

std::string MemcachedKey(uint64_t i) {
  char key[32];
  std::snprintf(key, sizeof(key), "key:%012llu", static_cast<unsigned long long>(i));
  return key;
}

}  // namespace

Slab::Slab(bool like_pool) {
  void* p = MAP_FAILED;
  if (like_pool) {
    Result<std::unique_ptr<DramPool>> created = DramPool::Create(kSlab, /*huge_pages=*/true);
    if (created.ok()) {
      pool_ = std::move(*created);
      p = pool_->base();
    }
  } else {
    p = mmap(nullptr, kSlab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
             0);
  }
  if (p == MAP_FAILED) {
    std::perror("bench slab");
    std::abort();
  }
  base_ = static_cast<char*>(p);
  for (uint64_t i = 0; i < kSlab; i += 4096) base_[i] = static_cast<char>(i >> 12);
}
Slab::~Slab() {
  if (!pool_) munmap(base_, kSlab);
}
char* Slab::Slot(uint64_t i, uint64_t size) const { return base_ + (i % (kSlab / size)) * size; }

Series MemcpyBaseline(uint64_t size, uint64_t count) {
  // A put copies from a client's private buffer into the pool, a get back:
  // the baseline copies between the same two kinds of memory.
  Slab src, dst(/*like_pool=*/true);
  Series s{"memcpy dram (baseline)", size, 1};
  Timed(1, count, &s, [&](int, std::vector<double>* lat) {
    for (uint64_t i = 0; i < count; ++i) {
      const double a = NowSeconds();
      std::memcpy(dst.Slot(i * 7 + 3, size), src.Slot(i, size), size);
      lat->push_back(NowSeconds() - a);
    }
  });
  return s;
}

namespace {

int client_spin_us = -1;
bool client_lease_reads = false;

ClientOptions BaseOptions() {
  ClientOptions options;
  if (client_spin_us >= 0) options.spin_us = client_spin_us;
  options.lease_free_reads = !client_lease_reads;
  return options;
}

}  // namespace

void SetClientSpinUs(int spin_us) { client_spin_us = spin_us; }
void SetClientLeaseReads(bool leases) { client_lease_reads = leases; }

void RunTierkv(const std::string& address, const std::string& label, uint64_t size, uint64_t count,
               int threads, bool pipelined, std::vector<Series>* out) {
  const std::string put_name = "tierkv " + label + " put" + (pipelined ? " pipelined" : "");
  Series put{put_name, size, threads};
  Series get{"tierkv " + label + " get", size, threads};
  ClientOptions options = BaseOptions();
  options.pipeline_commits = pipelined;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<Slab>> slabs;
  for (int t = 0; t < threads; ++t) {
    auto c = Client::Connect(address, options);
    if (!c.ok()) {
      std::fprintf(stderr, "connect %s: %s\n", address.c_str(), c.status().ToString().c_str());
      return;
    }
    clients.push_back(std::move(*c));
    slabs.push_back(std::make_unique<Slab>());
  }
  std::vector<uint64_t> errors(threads, 0);
  auto phase = [&](bool is_put, Series* series) {
    Timed(threads, count, series, [&](int t, std::vector<double>* lat) {
      Client& c = *clients[t];
      for (uint64_t i = 0; i < count; ++i) {
        const std::string key = "b/" + std::to_string(t) + "/" + std::to_string(i);
        char* slot = slabs[t]->Slot(i, size);
        const double a = NowSeconds();
        const bool ok = is_put ? c.Put(key, slot, size).ok() : c.Get(key, slot, size).ok();
        lat->push_back(NowSeconds() - a);
        errors[t] += ok ? 0 : 1;
      }
      if (is_put) errors[t] += c.Flush().ok() ? 0 : 1;  // the last pipelined commit
    });
  };
  phase(true, &put);
  phase(false, &get);
  uint64_t total_errors = 0;
  for (uint64_t e : errors) total_errors += e;
  if (total_errors > 0)
    std::fprintf(stderr, "%s: %llu errors\n", put_name.c_str(),
                 static_cast<unsigned long long>(total_errors));
  (void)clients[0]->RemoveAll(kDefaultTenant, /*force=*/true);
  out->push_back(std::move(put));
  if (!pipelined) out->push_back(std::move(get));
}

bool PreloadBatchKeys(const std::string& address, int threads, uint64_t count) {
  auto c = Client::Connect(address);
  if (!c.ok()) return false;
  const std::string value(kBatchValueBytes, 'v');
  for (int t = 0; t < threads; ++t) {
    std::vector<std::string> keys;
    for (uint64_t i = 0; i < count; ++i)
      keys.push_back("s/" + std::to_string(t) + "/" + std::to_string(i));
    std::vector<PutItem> items;
    for (const auto& k : keys) items.push_back({k, value.data(), kBatchValueBytes, {}});
    for (const Status& st : (*c)->BatchPut(items, kBatchTenant, /*upsert=*/true)) {
      if (!st.ok()) return false;
    }
  }
  return true;
}

void RunBatched(const std::string& address, uint64_t count, size_t batch, int threads, int passes,
                std::vector<Series>* out) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::vector<std::string>> keys(threads);
  for (int t = 0; t < threads; ++t) {
    auto c = Client::Connect(address, BaseOptions());
    if (!c.ok()) return;
    clients.push_back(std::move(c).value());
    for (uint64_t i = 0; i < count; ++i)
      keys[t].push_back("s/" + std::to_string(t) + "/" + std::to_string(i));
  }
  const uint64_t calls = count / batch;
  std::vector<uint64_t> misses(threads, 0);
  for (int mode = 0; mode < 2; ++mode) {
    Series s{"tierkv uds batch" + std::to_string(batch) + (mode ? " get" : " exist"),
             kBatchValueBytes, threads};
    Timed(threads, calls * batch * passes, &s, [&](int t, std::vector<double>* lat) {
      std::vector<std::string> bufs(batch, std::string(kBatchValueBytes, '\0'));
      std::vector<std::string_view> views(batch);
      std::vector<GetItem> items(batch);
      for (int pass = 0; pass < passes; ++pass) {
        for (uint64_t call = 0; call < calls; ++call) {
          for (size_t j = 0; j < batch; ++j) {
            views[j] = keys[t][call * batch + j];
            items[j] = {views[j], bufs[j].data(), kBatchValueBytes};
          }
          const double a = NowSeconds();
          if (mode == 0) {
            for (const Status& st : clients[t]->BatchExist(views, kBatchTenant))
              misses[t] += st.ok() ? 0 : 1;
          } else {
            for (const auto& r : clients[t]->BatchGet(items, kBatchTenant))
              misses[t] += r.ok() ? 0 : 1;
          }
          lat->push_back(NowSeconds() - a);
        }
      }
    });
    out->push_back(std::move(s));
  }
  uint64_t total = 0;
  for (uint64_t m : misses) total += m;
  if (total > 0)
    std::fprintf(stderr, "tierkv batch%zu x%d: %llu misses\n", batch, threads,
                 static_cast<unsigned long long>(total));
}

bool PreloadMemcached(const std::string& socket, uint64_t keys, uint64_t size) {
  MemcachedConn c(socket);
  const std::string value(size, 'm');
  for (uint64_t i = 0; i < keys && c.ok(); ++i) {
    if (!c.Set(MemcachedKey(i), value)) return false;
  }
  return c.ok();
}

void RunMemcachedBatched(const std::string& socket, uint64_t count, size_t batch, int threads,
                         int passes, std::vector<Series>* out) {
  std::vector<std::unique_ptr<MemcachedConn>> conns;
  std::vector<std::vector<std::string>> keys(threads);
  for (int t = 0; t < threads; ++t) {
    conns.push_back(std::make_unique<MemcachedConn>(socket));
    if (!conns.back()->ok()) return;
    for (uint64_t i = 0; i < count; ++i) keys[t].push_back(MemcachedKey(t * count + i));
  }
  const uint64_t calls = count / batch;
  std::vector<uint64_t> misses(threads, 0);
  for (int mode = 0; mode < 2; ++mode) {
    Series s{"memcached mg batch" + std::to_string(batch) + (mode ? " get" : " exist"),
             kBatchValueBytes, threads};
    Timed(threads, calls * batch * passes, &s, [&](int t, std::vector<double>* lat) {
      std::vector<std::string> bufs(batch, std::string(kBatchValueBytes, '\0'));
      for (int pass = 0; pass < passes; ++pass) {
        for (uint64_t call = 0; call < calls; ++call) {
          const std::span<const std::string> ks(keys[t].data() + call * batch, batch);
          size_t hits = 0;
          const double a = NowSeconds();
          const bool ok =
              mode == 0 ? conns[t]->BatchExist(ks, &hits) : conns[t]->BatchGet(ks, bufs, &hits);
          lat->push_back(NowSeconds() - a);
          misses[t] += ok ? batch - hits : batch;
        }
      }
    });
    out->push_back(std::move(s));
  }
  uint64_t total = 0;
  for (uint64_t m : misses) total += m;
  if (total > 0)
    std::fprintf(stderr, "memcached batch%zu x%d: %llu misses\n", batch, threads,
                 static_cast<unsigned long long>(total));
}

bool RunMemcachedSetGet(const std::string& socket, uint64_t size, uint64_t count, bool warm,
                        Series* put, Series* get) {
  MemcachedConn c(socket);
  if (!c.ok()) return false;
  // New names each call: a cold run never finds its keys stored by an earlier one.
  static int generation = 0;
  const std::string prefix = "bench:" + std::to_string(generation++) + ":";
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < count; ++i) keys.push_back(prefix + std::to_string(i));
  const std::string value(size, 'r');
  bool ok = true;
  if (warm) {
    for (const auto& k : keys) ok = ok && c.Set(k, value);
  }
  Timed(1, count, put, [&](int, std::vector<double>* lat) {
    for (const auto& k : keys) {
      const double a = NowSeconds();
      ok = ok && c.Set(k, value);
      lat->push_back(NowSeconds() - a);
    }
  });
  std::string out(size, '\0');
  Timed(1, count, get, [&](int, std::vector<double>* lat) {
    for (const auto& k : keys) {
      size_t len = 0;
      const double a = NowSeconds();
      ok = ok && c.Get(k, out.data(), out.size(), &len) && len == size;
      lat->push_back(NowSeconds() - a);
    }
  });
  return ok;
}

}  // namespace tierkv::bench
