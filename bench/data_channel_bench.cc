// tierkv_data_channel_bench: the peer data channel alone, in one process.
//
//   tierkv_data_channel_bench [--json PATH] [--mib 256]
//
// A DataServer serving a pool of --mib MiB (larger than the caches, as a
// manager's pool is), and a TcpTransport reading 1 MiB and 16 MiB items of it
// in turn (each verified against its xxh3-64) by 1 and 4 threads, against
// plain TCP copies of the same bytes over loopback in the same run: fetched
// (an 8-byte request per object, one round trip per object as for a READ)
// and streamed. No manager, no grant RPC, no store: what the transport itself
// costs. Three interleaved rounds; each figure is the median round.
//
// Also, one thread, 4 KiB and 1 MiB items: an AUTHORIZE (granted at once, on
// the connection's event loop) then a READ after its answer, against the READ
// written right behind the AUTHORIZE (AuthorizeAndRead), and the same pair
// with the AUTHORIZE decided on the server's blocking pool (a second server
// over the same grants), p50 and p99 latency of the pair, interleaved in the
// same rounds.
//
// Every transport figure is taken twice in the same rounds: by a transport
// that polls the socket before a wait sleeps (spin_us 400, the manager's
// default --spin-us) and by one that sleeps at once (spin_us 0).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "channel_rig.h"
#include "remote_bench_util.h"
#include "transfer/data_server.h"
#include "transfer/tcp_transport.h"

namespace tierkv::bench {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kGeneration = kRigGeneration;

// The same grants, every authorization decided on the server's blocking pool
// (as one that must wait for a rewarm is).
class PoolDecided final : public transfer::GrantSource {
 public:
  explicit PoolDecided(SlicedGrant* grants) : grants_(grants) {}
  Result<transfer::GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) override {
    return grants_->Open(ticket, item, generation);
  }
  Result<std::string> Authorize(uint64_t ticket, std::string_view request) override {
    return grants_->Authorize(ticket, request);
  }

 private:
  SlicedGrant* const grants_;
};

// `ops` authorizations of item-sized tickets, each with a READ of one item:
// after the answer (`early` false) or right behind the AUTHORIZE. Latencies of
// the pairs into *out; false on a failure.
bool AuthorizedReads(transfer::TcpTransport& t, const SlicedGrant& pool, const std::string& ep,
                     uint64_t size, int ops, bool early, Series* out) {
  std::vector<uint8_t> dest(size, 1);
  const MemoryPiece into[] = {{dest.data(), size}};
  const uint64_t items = pool.items(size);
  const double t0 = NowSeconds();
  for (int n = 0; n < ops; ++n) {
    const transfer::ReadRequest req{size, static_cast<uint32_t>(n % items), kGeneration, 0, size};
    const double a = NowSeconds();
    Status read;
    Result<std::string> answer =
        early ? t.AuthorizeAndRead(ep, size, "", 5000, req, into, nullptr, &read)
              : t.Authorize(ep, size, "", 5000);
    if (answer.ok() && !early) read = t.Read(ep, req, dest.data());
    if (!answer.ok() || !read.ok()) return false;
    out->latencies.push_back(NowSeconds() - a);
  }
  out->ops = static_cast<uint64_t>(ops);
  out->seconds = NowSeconds() - t0;
  return true;
}

int Main(int argc, char** argv) {
  const auto [json, mib] = ParseRemoteBenchArgs(argc, argv);
  const uint64_t total = std::max<uint64_t>(mib, 64) * kMiB;
  SlicedGrant grant(total);
  std::string ep, pool_ep;
  std::unique_ptr<transfer::DataServer> server = StartRigServer(&grant, &ep);
  PoolDecided pool_decided(&grant);
  std::unique_ptr<transfer::DataServer> pool_server = StartRigServer(&pool_decided, &pool_ep);
  auto transport = RigTransport(400);
  auto sleeper = RigTransport(0);
  if (server == nullptr || pool_server == nullptr || !transport.ok() || !sleeper.ok()) return 1;
  // Connections opened before the clock starts.
  (void)ChannelGBps(**transport, grant, ep, kMiB, 16 * kMiB, 4);
  (void)ChannelGBps(**sleeper, grant, ep, kMiB, 16 * kMiB, 4);
  std::vector<Series> series;
  std::vector<Ratio> ratios;
  constexpr int kRounds = 3;
  bool failed = false;
  for (uint64_t size : {kMiB, 16 * kMiB}) {
    for (int threads : {1, 4}) {
      std::vector<double> streamed, fetched, channel, slept, polled_by_slept;
      for (int r = 0; r < kRounds; ++r) {
        streamed.push_back(RawTcpGBps(size, total, threads, false));
        fetched.push_back(RawTcpGBps(size, total, threads, true));
        // Which transport goes first alternates from round to round.
        const bool poller_first = r % 2 == 0;
        if (!poller_first) slept.push_back(ChannelGBps(**sleeper, grant, ep, size, total, threads));
        channel.push_back(ChannelGBps(**transport, grant, ep, size, total, threads));
        if (poller_first) slept.push_back(ChannelGBps(**sleeper, grant, ep, size, total, threads));
        failed = failed || channel.back() == 0 || slept.back() == 0;
        polled_by_slept.push_back(channel.back() / std::max(slept.back(), 1e-9));
      }
      const double s = Median(streamed), f = Median(fetched), c = Median(channel);
      const std::string x = " x" + std::to_string(threads);
      AddRateSeries(&series, size, threads, total,
                    {{"plain tcp copy", s},
                     {"plain tcp fetch", f},
                     {"data channel read", c},
                     {"data channel read, no polling", Median(slept)}});
      ratios.push_back({"data channel " + SizeName(size) + x + " / tcp fetch" + x, c / f, 0});
      ratios.push_back({"data channel " + SizeName(size) + x + " / plain tcp" + x, c / s, 0});
      ratios.push_back({"data channel " + SizeName(size) + x + ", polling / not (median of 3)",
                        Median(polled_by_slept), 0});
    }
  }
  for (uint64_t size : {uint64_t{4096}, kMiB}) {
    std::vector<Series> two, one, one_slept, one_pool;
    for (int r = 0; r < kRounds; ++r) {
      two.emplace_back("authorize, then read", size, 1);
      one.emplace_back("authorize and read, one trip", size, 1);
      one_slept.emplace_back("authorize and read, one trip, no polling", size, 1);
      one_pool.emplace_back("authorize and read, one trip, decided on the pool", size, 1);
      failed = !AuthorizedReads(**transport, grant, ep, size, 300, false, &two.back()) || failed;
      failed = !AuthorizedReads(**transport, grant, ep, size, 300, true, &one.back()) || failed;
      failed = !AuthorizedReads(**sleeper, grant, ep, size, 300, true, &one_slept.back()) || failed;
      failed = !AuthorizedReads(**transport, grant, pool_ep, size, 300, true, &one_pool.back()) ||
               failed;
    }
    auto p50 = [](const Series& x) { return x.PercentileUs(50); };
    auto mid = [&](std::vector<Series>& v) -> Series& {
      std::sort(v.begin(), v.end(),
                [&](const Series& a, const Series& b) { return p50(a) < p50(b); });
      return v[v.size() / 2];
    };
    Series& t = mid(two);
    Series& o = mid(one);
    Series& os = mid(one_slept);
    Series& op = mid(one_pool);
    ratios.push_back(
        {"authorize+read p50 " + SizeName(size) + ", two trips / one", p50(t) / p50(o), 0});
    ratios.push_back({"authorize+read p50 " + SizeName(size) + ", one trip, no polling / polling",
                      p50(os) / p50(o), 0});
    ratios.push_back(
        {"authorize+read p50 " + SizeName(size) + ", one trip, decided on the pool / at once",
         p50(op) / p50(o), 0});
    series.push_back(std::move(t));
    series.push_back(std::move(o));
    series.push_back(std::move(os));
    series.push_back(std::move(op));
  }
  server->Stop();
  pool_server->Stop();
  PrintTable(series);
  PrintRatios(ratios);
  if (failed) {
    std::fprintf(stderr, "a data channel read failed\n");
    return 1;
  }
  return FinishReport(json, series, ratios, kRounds);
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) { return tierkv::bench::Main(argc, argv); }
