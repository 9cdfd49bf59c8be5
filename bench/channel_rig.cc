#include "channel_rig.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "bench_util.h"

namespace tierkv::bench {

SlicedGrant::SlicedGrant(uint64_t size) : bytes_(size) {
  for (uint64_t i = 0; i < size; i += 4096) bytes_[i] = static_cast<uint8_t>(i >> 12);
}

Result<transfer::GrantSpan> SlicedGrant::Open(uint64_t ticket, uint32_t item, uint64_t generation) {
  if (ticket == 0 || generation != kRigGeneration || (item + 1) * ticket > bytes_.size()) {
    return NotFound("no grant");
  }
  std::lock_guard lock(mu_);
  std::unique_ptr<ValueDigests>& d = digests_[{ticket, item}];
  if (!d) d = std::make_unique<ValueDigests>();
  return transfer::GrantSpan{nullptr, bytes_.data() + item * ticket, ticket, d.get()};
}

std::unique_ptr<transfer::DataServer> StartRigServer(transfer::GrantSource* grants,
                                                     std::string* endpoint) {
  transfer::DataServerOptions options;
  options.listen = "127.0.0.1:0";
  auto server = std::make_unique<transfer::DataServer>(options, grants);
  if (Status st = server->Start(); !st.ok()) {
    std::fprintf(stderr, "data server: %s\n", st.ToString().c_str());
    return nullptr;
  }
  *endpoint = "127.0.0.1:" + std::to_string(server->port());
  return server;
}

Result<std::unique_ptr<transfer::TcpTransport>> RigTransport(int spin_us) {
  transfer::TcpTransportOptions options;
  options.connections_per_peer = 4;
  options.spin_us = spin_us;
  return transfer::TcpTransport::Create(options);
}

double ChannelGBps(transfer::TcpTransport& t, const SlicedGrant& pool, const std::string& ep,
                   uint64_t size, uint64_t total, int threads) {
  std::vector<std::vector<uint8_t>> dest(threads, std::vector<uint8_t>(size, 1));
  std::atomic<bool> failed{false};
  const uint64_t per = std::max<uint64_t>(1, total / size / static_cast<uint64_t>(threads));
  const uint64_t items = pool.items(size);
  const double t0 = NowSeconds();
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      for (uint64_t n = 0; n < per; ++n) {
        const auto item = static_cast<uint32_t>((n * threads + i) % items);
        if (!t.Read(ep, {size, item, kRigGeneration, 0, size}, dest[i].data()).ok()) {
          failed = true;
        }
      }
    });
  }
  for (std::thread& th : ts) th.join();
  const double secs = NowSeconds() - t0;
  return failed ? 0 : double(per * size * static_cast<uint64_t>(threads)) / secs / 1e9;
}

}  // namespace tierkv::bench
