// The peer data channel in one process, for the remote-read benchmarks: a
// pool served by a DataServer (SlicedGrant) and reads of it through a
// TcpTransport (ChannelGBps), with no manager, no grant RPC and no store.
#ifndef TIERKV_BENCH_CHANNEL_RIG_H_
#define TIERKV_BENCH_CHANNEL_RIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "media/checksum.h"
#include "transfer/data_server.h"
#include "transfer/tcp_transport.h"

namespace tierkv::bench {

// The generation every READ of a SlicedGrant names.
inline constexpr uint64_t kRigGeneration = 3;

// A pool of `size` bytes, far larger than the caches as a manager's is. The
// ticket of a READ is the item size it slices the pool by (a bench's
// convention): item i is bytes [i * ticket, (i + 1) * ticket). Every
// authorization is granted at once, on the connection's event loop; what a
// READ checks is Open's. As a manager does, each item keeps the checksums
// its READs computed, so only the first READ of an item hashes it on the
// serving side.
class SlicedGrant final : public transfer::GrantSource {
 public:
  explicit SlicedGrant(uint64_t size);
  Result<transfer::GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) override;
  Result<std::string> Authorize(uint64_t, std::string_view) override { return std::string(); }
  std::optional<Result<std::string>> TryAuthorize(uint64_t, std::string_view) override {
    return std::string();
  }
  uint64_t items(uint64_t size) const { return bytes_.size() / size; }

 private:
  std::vector<uint8_t> bytes_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, std::unique_ptr<ValueDigests>> digests_;
};

// A DataServer serving `grants` on a loopback port of the system's choosing;
// null, with a message on stderr, when it cannot start. *endpoint gets its
// "HOST:PORT".
std::unique_ptr<transfer::DataServer> StartRigServer(transfer::GrantSource* grants,
                                                     std::string* endpoint);

// A TcpTransport with a manager's defaults (4 connections per peer) that
// polls for up to `spin_us` before a wait sleeps (400: a manager's default
// --spin-us; 0: never).
Result<std::unique_ptr<transfer::TcpTransport>> RigTransport(int spin_us);

// `total` bytes of `pool` read through `t` from the server at `ep` as items of
// `size` by `threads` threads, walking the pool, each checked against its
// checksum; GB/s, 0 on a failure.
double ChannelGBps(transfer::TcpTransport& t, const SlicedGrant& pool, const std::string& ep,
                   uint64_t size, uint64_t total, int threads);

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_CHANNEL_RIG_H_
