// The plain TCP baselines of the remote-read benchmarks: the same bytes moved
// over loopback sockets with nothing else done to them.
#ifndef TIERKV_BENCH_RAW_TCP_H_
#define TIERKV_BENCH_RAW_TCP_H_

#include <cstdint>

namespace tierkv::bench {

// GB/s of `total` bytes moved in messages of `size` over `streams` loopback
// connections in parallel (TCP_NODELAY, blocking sockets). Streamed
// (`fetched` false): the sender writes message after message. Fetched: the
// receiver asks for each message with an 8-byte request and the sender
// answers it, one round trip per message as for a get.
double RawTcpGBps(uint64_t size, uint64_t total, int streams, bool fetched);

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_RAW_TCP_H_
