// What the remote-read benchmarks (tierkv_remote_bench,
// tierkv_data_channel_bench) share: their options, and their plain TCP
// baselines, the same bytes moved over loopback sockets with nothing else
// done to them.
#ifndef TIERKV_BENCH_REMOTE_BENCH_UTIL_H_
#define TIERKV_BENCH_REMOTE_BENCH_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"

namespace tierkv::bench {

// GB/s of `total` bytes moved in messages of `size` over `streams` loopback
// connections in parallel (TCP_NODELAY, blocking sockets). Streamed
// (`fetched` false): the sender writes message after message. Fetched: the
// receiver asks for each message with an 8-byte request and the sender
// answers it, one round trip per message as for a get. `distinct`: each
// message is sent from and received into bytes of its own (`total` bytes on
// each side, out of the caches once they pass them), instead of one
// cache-hot buffer per side.
double RawTcpGBps(uint64_t size, uint64_t total, int streams, bool fetched, bool distinct = false);

// --json PATH and --mib N (the bytes each measurement moves, in MiB).
struct RemoteBenchArgs {
  std::string json;
  uint64_t mib = 256;
};
RemoteBenchArgs ParseRemoteBenchArgs(int argc, char** argv);

// Appends one series per (name, GB/s) of a case: `bytes` moved as objects of
// `size` by `threads`, the plain copy, the fetch and the measured path.
void AddRateSeries(std::vector<Series>* out, uint64_t size, int threads, uint64_t bytes,
                   const std::vector<std::pair<std::string, double>>& rates);

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_REMOTE_BENCH_UTIL_H_
