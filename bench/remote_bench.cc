// tierkv_remote_bench: remote reads between two managers on loopback.
//
//   tierkv_remote_bench [--json PATH] [--mib 256]
//
// 1. Throughput: gets on manager b of 1 MiB and 16 MiB objects held only by
//    manager a (each fetched through a source grant and a READ on the data
//    channel, then copied out of b's pool by the client), by 1 and 4 client
//    threads, against a plain TCP socket copy of the same bytes (1 and 4
//    streams, loopback, same run), streamed and fetched with one request per
//    object, and fetched again with every object in bytes of its own on both
//    sides (distinct buffers, as the measured path: out of the caches). Between rounds b drops its
//    copies, so every get is a remote one; a keeps the checksums it computed, so only round 1 of x1
//    reads values a has not hashed before (reported on its own as well).
//    The same gets into registered memory (Client::RegisterBuffer: the data
//    channel reads each value straight into the client's buffer, and b keeps
//    no copy), in the same rounds before the plain ones; and, on a, local
//    gets into registered memory beside plain local gets of the same bytes.
// 2. Latency: a local hit against a remote hit on b, 4 KiB and 1 MiB
//    objects, median and p99; the same into registered memory (the remote
//    hit on b, the local hit on the owner a).
// 3. A batch of 64 objects of 1 MiB with lookahead (b) and without (c,
//    --remote-read-lookahead false).
// 4. Where authorizations go: b sends them over the owner's data channel
//    (the default), d over peer gRPC (--remote-authorize-via grpc); 1 MiB x1
//    gets and the remote hit latencies of both, in the same rounds.
// 5. The ceiling of a remote get on this machine, from its two parts that no
//    manager can leave out, measured in the same rounds: a READ of the same
//    sizes on the data channel alone (a DataServer and a TcpTransport in this
//    process, checksums checked, with the managers' defaults: 4 connections,
//    400 µs polling) and the client's get of the object once it is local on
//    b (the gets of the remote round, repeated). A remote get does one after
//    the other (the bytes are served once their checksum is verified), so at
//    best it takes the sum of their times: 1 / (1 / read + 1 / local get).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "channel_rig.h"
#include "cluster_member.h"
#include "etcd_process.h"
#include "manager_process.h"
#include "remote_bench_util.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

using testing::EtcdCluster;
using testing::ManagerProcess;

constexpr uint64_t kMiB = 1 << 20;

std::unique_ptr<ManagerProcess> Start(const EtcdCluster& etcd, const std::string& cluster,
                                      const std::string& id, std::vector<std::string> extra = {}) {
  return StartMember(etcd, cluster, id, std::move(extra));
}

int64_t Entries(const ManagerProcess& m) {
  httplib::Client http(m.rest());
  auto res = http.Get("/cache/metadata");
  if (!res) return -1;
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  return j.is_object() ? j["index"]["entries"].get<int64_t>() : -1;
}

bool WaitEntries(const ManagerProcess& m, int64_t n) {
  for (int i = 0; i < 3000; ++i) {
    if (Entries(m) == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void PutObjects(const ManagerProcess& m, const std::string& prefix, int n, uint64_t size) {
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return;
  const std::string v(size, 'r');
  for (int i = 0; i < n; ++i) (void)(*c)->Put(prefix + std::to_string(i), v);
}

void DropAll(const ManagerProcess& m) {
  auto c = Client::Connect(m.uds());
  if (c.ok()) (void)(*c)->RemoveAll(kDefaultTenant, true);
}

// The clients the throughput gets use, kept for the whole run as an
// engine keeps its own: per manager, thread and kind (plain memory, or a
// registered buffer). On this VM a process's first touch of a page through
// a new mapping costs microseconds, so a client connected afresh for each
// measurement would pay it on every pool page a get copies out of.
struct BenchClient {
  std::unique_ptr<Client> client;
  std::vector<char> plain;
  RegisteredBuffer registered;
};
BenchClient* ClientFor(const ManagerProcess& m, int thread, bool registered) {
  static std::map<std::tuple<const ManagerProcess*, int, bool>, BenchClient> clients;
  BenchClient& c = clients[{&m, thread, registered}];
  if (c.client) return &c;
  auto connected = Client::Connect(m.uds());
  if (!connected.ok()) return nullptr;
  c.client = std::move(*connected);
  constexpr uint64_t kMost = 16 * kMiB;  // the largest object measured
  if (registered) {
    Result<RegisteredBuffer> r = c.client->RegisterBuffer(kMost);
    if (!r.ok()) {  // a manager without registered memory (an older build)
      c.client.reset();
      return nullptr;
    }
    c.registered = *r;
  } else {
    c.plain.assign(kMost, 1);
  }
  return &c;
}

// Gets keys prefix0..prefix{n-1} on `m`, split over `threads`; GB/s. With
// `registered`, each thread's client gets into a buffer it registered (the
// manager writes the values there) instead of plain memory of its own.
Series RemoteGets(const ManagerProcess& m, const std::string& prefix, int n, uint64_t size,
                  int threads, int* failures, bool registered = false) {
  Series s("tierkv remote get", size, threads);
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  std::vector<BenchClient*> clients;
  for (int t = 0; t < threads; ++t) {
    clients.push_back(ClientFor(m, t, registered));
    if (clients.back() == nullptr) return s;
  }
  const double t0 = NowSeconds();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      BenchClient& c = *clients[t];
      uint8_t* dest = registered ? c.registered.data : reinterpret_cast<uint8_t*>(c.plain.data());
      for (int i = t; i < n; i += threads) {
        if (!c.client->Get(prefix + std::to_string(i), dest, size).ok()) ++failed;
      }
    });
  }
  for (std::thread& t : ts) t.join();
  s.seconds = NowSeconds() - t0;
  s.ops = static_cast<uint64_t>(n - failed.load());
  *failures += failed.load();
  return s;
}

// Latency of one get of a key just removed locally (remote hit), then of the
// same key again (local hit).
void Latencies(const ManagerProcess& m, const std::string& prefix, int n, uint64_t size,
               Series* remote, Series* local) {
  BenchClient* c = ClientFor(m, 0, false);  // one the throughput rounds warmed
  if (c == nullptr) return;
  char* buf = c->plain.data();
  for (int i = 0; i < n; ++i) {
    const std::string key = prefix + std::to_string(i);
    double t0 = NowSeconds();
    if (c->client->Get(key, buf, size).ok()) remote->latencies.push_back(NowSeconds() - t0);
    t0 = NowSeconds();
    if (c->client->Get(key, buf, size).ok()) local->latencies.push_back(NowSeconds() - t0);
  }
  remote->ops = remote->latencies.size();
  local->ops = local->latencies.size();
}

// Latency of one get into registered memory of a key held only by `owner`
// (on `requester`: a remote hit, leaving no copy there), then of the same key
// on its owner (a local hit).
void RegisteredLatencies(const ManagerProcess& requester, const ManagerProcess& owner,
                         const std::string& prefix, int n, uint64_t size, Series* remote,
                         Series* local) {
  auto rc = Client::Connect(requester.uds());
  auto oc = Client::Connect(owner.uds());
  if (!rc.ok() || !oc.ok()) return;
  Result<RegisteredBuffer> rb = (*rc)->RegisterBuffer(size);
  Result<RegisteredBuffer> ob = (*oc)->RegisterBuffer(size);
  if (!rb.ok() || !ob.ok()) return;
  // The owner's own first touch of each value is not a hit's cost (above).
  for (int i = 0; i < n; ++i) (void)(*oc)->Get(prefix + std::to_string(i), ob->data, size);
  for (int i = 0; i < n; ++i) {
    const std::string key = prefix + std::to_string(i);
    double t0 = NowSeconds();
    if ((*rc)->Get(key, rb->data, size).ok()) remote->latencies.push_back(NowSeconds() - t0);
    t0 = NowSeconds();
    if ((*oc)->Get(key, ob->data, size).ok()) local->latencies.push_back(NowSeconds() - t0);
  }
  remote->ops = remote->latencies.size();
  local->ops = local->latencies.size();
}

Series Batch(const ManagerProcess& m, const std::string& prefix, int reps, const char* name) {
  Series s(name, kMiB, 1);
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return s;
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(prefix + std::to_string(i));
  std::vector<std::vector<char>> bufs(64, std::vector<char>(kMiB, 1));
  std::vector<GetItem> items;
  for (int i = 0; i < 64; ++i) items.push_back({keys[i], bufs[i].data(), kMiB});
  for (int r = 0; r < reps; ++r) {
    const double t0 = NowSeconds();
    size_t ok = 0;
    for (const auto& got : (*c)->BatchGet(items)) ok += got.ok() ? 1 : 0;
    const double dt = NowSeconds() - t0;
    s.seconds += dt;
    s.ops += ok;
    s.latencies.push_back(dt);
    (void)(*c)->RemoveAll(kDefaultTenant, true);
  }
  return s;
}

int Main(int argc, char** argv) {
  const auto [json, mib] = ParseRemoteBenchArgs(argc, argv);
  EtcdCluster etcd(1);
  const std::string cluster = "remote-bench-" + std::to_string(getpid());
  const std::string dram = std::to_string(2 * mib + 256) + "MiB";
  auto a = Start(etcd, cluster, "a", {"--dram-size", dram, "--transfer-budget", dram});
  auto b = Start(etcd, cluster, "b", {"--dram-size", dram});
  auto c = Start(etcd, cluster, "c", {"--dram-size", dram, "--remote-read-lookahead", "false"});
  auto d = Start(etcd, cluster, "d", {"--dram-size", dram, "--remote-authorize-via", "grpc"});
  const int n1 = static_cast<int>(mib), n16 = static_cast<int>(mib / 16);
  PutObjects(*a, "m", n1, kMiB);
  PutObjects(*a, "h", n16, 16 * kMiB);
  PutObjects(*a, "s", 200, 4096);
  const int64_t total = n1 + n16 + 200;
  if (!WaitEntries(*b, total) || !WaitEntries(*c, total) || !WaitEntries(*d, total)) {
    std::fprintf(stderr, "the requesters never saw a's %lld objects\n",
                 static_cast<long long>(total));
    return 1;
  }
  SlicedGrant rig_pool(std::max<uint64_t>(mib, 64) * kMiB);
  std::string rig_ep;
  std::unique_ptr<transfer::DataServer> rig_server = StartRigServer(&rig_pool, &rig_ep);
  auto rig = RigTransport(400);
  if (rig_server == nullptr || !rig.ok()) return 1;
  (void)ChannelGBps(**rig, rig_pool, rig_ep, kMiB, 16 * kMiB, 4);  // connections opened
  std::vector<Series> series;
  std::vector<Ratio> ratios;
  int failures = 0;
  // Three interleaved rounds (plain copy, then remote gets, for each case);
  // the series and ratios report the median round.
  constexpr int kRounds = 3;
  for (uint64_t size : {kMiB, 16 * kMiB}) {
    const int n = size == kMiB ? n1 : n16;
    const std::string prefix = size == kMiB ? "m" : "h";
    for (int threads : {1, 4}) {
      std::vector<double> raws, fetches, colds, gets, grpc_gets, channels, locals, intos;
      const bool compare_grpc = size == kMiB && threads == 1;
      for (int r = 0; r < kRounds; ++r) {
        raws.push_back(RawTcpGBps(size, size * static_cast<uint64_t>(n), threads, false));
        fetches.push_back(RawTcpGBps(size, size * static_cast<uint64_t>(n), threads, true));
        colds.push_back(RawTcpGBps(size, size * static_cast<uint64_t>(n), threads, true, true));
        channels.push_back(
            ChannelGBps(**rig, rig_pool, rig_ep, size, size * static_cast<uint64_t>(n), threads));
        if (channels.back() == 0) ++failures;
        DropAll(*b);
        // Into registered memory first: it leaves no copy on b, so the plain
        // remote gets after it are remote too.
        intos.push_back(RemoteGets(*b, prefix, n, size, threads, &failures, true).GBps());
        Series s = RemoteGets(*b, prefix, n, size, threads, &failures);
        gets.push_back(s.GBps());
        locals.push_back(RemoteGets(*b, prefix, n, size, threads, &failures).GBps());
        if (compare_grpc) {
          DropAll(*d);
          grpc_gets.push_back(RemoteGets(*d, prefix, n, size, threads, &failures).GBps());
        }
      }
      if (compare_grpc) {
        ratios.push_back(
            {"remote get 1MiB x1, authorize over the data channel / over peer gRPC "
             "(median of 3)",
             Median(gets) / Median(grpc_gets), 0});
        ratios.push_back({"remote get 1MiB x1 with peer gRPC authorizations / plain tcp x1",
                          Median(grpc_gets) / Median(raws), 0});
      }
      const double raw = Median(raws), fetch = Median(fetches), got = Median(gets);
      const double channel = Median(channels), local = Median(locals), into = Median(intos);
      const double ceiling = channel > 0 && local > 0 ? 1 / (1 / channel + 1 / local) : 0;
      const std::string x = " x" + std::to_string(threads);
      AddRateSeries(&series, size, threads, size * static_cast<uint64_t>(n),
                    {{"plain tcp copy", raw},
                     {"plain tcp fetch", fetch},
                     {"plain tcp fetch, distinct buffers", Median(colds)},
                     {"data channel read alone", channel},
                     {"tierkv local get (b)", local},
                     {"remote get ceiling: read, then local get", ceiling},
                     {"tierkv remote get", got},
                     {"tierkv remote get into registered memory", into}});
      ratios.push_back({"remote get into registered memory " + SizeName(size) + x + " / plain tcp" +
                            x + " (median of 3)",
                        into / raw, 0.8});
      ratios.push_back({"remote get into registered memory " + SizeName(size) + x +
                            " / remote get (pool, then copy)" + x,
                        into / got, 0});
      if (threads == 1) {
        ratios.push_back({"data channel read alone " + SizeName(size) + " x1 / plain tcp x1",
                          channel / raw, 0.9});
        if (size == kMiB) {
          ratios.push_back(
              {"remote get into registered memory 1MiB x1 / tcp fetch, a request "
               "per object x1",
               into / fetch, 0.9});
        }
      }
      ratios.push_back({"remote get " + SizeName(size) + x + " / plain tcp" + x + " (median of 3)",
                        got / raw, 0.8});
      ratios.push_back({"remote get ceiling " + SizeName(size) + x +
                            " (data channel read, then local get) / plain tcp" + x,
                        ceiling / raw, 0});
      ratios.push_back(
          {"remote get " + SizeName(size) + x + " / its ceiling" + x, got / ceiling, 0});
      ratios.push_back({"remote get " + SizeName(size) + x + " / tcp fetch, a request per object" +
                            x + " (median of 3)",
                        got / fetch, 0});
      ratios.push_back({"remote get " + SizeName(size) + x +
                            " / tcp fetch of distinct buffers (cold)" + x + " (median of 3)",
                        got / Median(colds), 0});
      if (threads == 1) {
        // Round 1 of x1 is the first READ of each value: the owner hashes it
        // then and answers later rounds with the checksum it kept. (Against
        // the median copy: the first copy of a run is often a cold outlier.)
        ratios.push_back({"remote get " + SizeName(size) + x +
                              ", first read of each value (round 1) / plain tcp" + x,
                          gets[0] / raw, 0});
      }
    }
  }
  // Local gets of the same bytes on a, whose clients put them: plain, and
  // into registered memory. One pass of each first: on this VM a process's
  // first touch of a page costs microseconds, and the plain path's client
  // touched every value when it put it while the manager, which copies for a
  // get into registered memory, never did. Then interleaved rounds,
  // alternating which goes first.
  for (uint64_t size : {kMiB, 16 * kMiB}) {
    const int n = size == kMiB ? n1 : n16;
    const std::string prefix = size == kMiB ? "m" : "h";
    for (int threads : {1, 4}) {
      (void)RemoteGets(*a, prefix, n, size, threads, &failures);
      (void)RemoteGets(*a, prefix, n, size, threads, &failures, true);
      std::vector<double> plain, into;
      for (int r = 0; r < kRounds; ++r) {
        for (bool registered : {r % 2 == 0, r % 2 != 0}) {
          const double g = RemoteGets(*a, prefix, n, size, threads, &failures, registered).GBps();
          (registered ? into : plain).push_back(g);
        }
      }
      const std::string x = " x" + std::to_string(threads);
      AddRateSeries(&series, size, threads, size * static_cast<uint64_t>(n),
                    {{"tierkv local get (a)", Median(plain)},
                     {"tierkv local get into registered memory (a)", Median(into)}});
      ratios.push_back({"local get into registered memory " + SizeName(size) + x +
                            " / plain local get" + x + " (a, median of 3)",
                        Median(into) / Median(plain), 1.0});
    }
  }
  DropAll(*b);
  DropAll(*d);
  for (uint64_t size : {uint64_t{4096}, kMiB}) {
    Series remote("remote hit latency", size, 1), local("local hit latency", size, 1);
    Series remote_grpc("remote hit latency, gRPC authorize", size, 1),
        local_grpc("local hit latency (d)", size, 1);
    Latencies(*b, size == 4096 ? "s" : "m", 200, size, &remote, &local);
    Latencies(*d, size == 4096 ? "s" : "m", 200, size, &remote_grpc, &local_grpc);
    remote.seconds = local.seconds = remote_grpc.seconds = 1;  // latency: ops/s not meaningful
    ratios.push_back({"remote / local hit p50 " + SizeName(size),
                      remote.PercentileUs(50) / std::max(local.PercentileUs(50), 1e-3), 0});
    ratios.push_back({"remote hit p50 " + SizeName(size) + ", gRPC / data channel authorize",
                      remote_grpc.PercentileUs(50) / std::max(remote.PercentileUs(50), 1e-3), 0});
    series.push_back(remote);
    series.push_back(local);
    series.push_back(remote_grpc);
    Series remote_into("remote hit latency, registered memory", size, 1),
        local_into("local hit latency, registered memory (a)", size, 1);
    DropAll(*b);  // the plain gets above left copies
    RegisteredLatencies(*b, *a, size == 4096 ? "s" : "m", 200, size, &remote_into, &local_into);
    remote_into.seconds = local_into.seconds = 1;
    ratios.push_back({"remote / local hit p50 " + SizeName(size) + ", registered memory",
                      remote_into.PercentileUs(50) / std::max(local_into.PercentileUs(50), 1e-3),
                      0});
    series.push_back(remote_into);
    series.push_back(local_into);
  }
  DropAll(*b);
  Series with = Batch(*b, "m", 10, "batch 64x1MiB lookahead");
  Series without = Batch(*c, "m", 10, "batch 64x1MiB no lookahead");
  series.push_back(with);
  series.push_back(without);
  ratios.push_back({"batch 64x1MiB lookahead / without", with.GBps() / without.GBps(), 0});
  rig_server->Stop();
  PrintTable(series);
  PrintRatios(ratios);
  if (failures > 0) std::fprintf(stderr, "%d remote gets failed\n", failures);
  return FinishReport(json, series, ratios);
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) { return tierkv::bench::Main(argc, argv); }
