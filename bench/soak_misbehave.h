// Misbehaving clients for tierkv_soak --misbehave: while the well-behaved
// clients verify every byte, these try what a buggy or hostile client would:
// commits, aborts and releases of foreign and stale ids, floods of metric
// reports (new ranks, NaN values), connections that never say HELLO, idle
// sessions, and HTTP clients that trickle a header line at a time.
#ifndef TIERKV_BENCH_SOAK_MISBEHAVE_H_
#define TIERKV_BENCH_SOAK_MISBEHAVE_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace tierkv::soak {

struct MisbehaveTally {
  std::atomic<uint64_t> foreign_ids{0};       // foreign or stale ids sent
  std::atomic<uint64_t> foreign_accepted{0};  // ... that were not refused (must stay 0)
  std::atomic<uint64_t> reports{0};           // hostile metric reports sent
  std::atomic<uint64_t> idle_conns{0};        // connections opened to sit idle
  std::atomic<uint64_t> trickle_lines{0};     // header lines trickled to the REST API
  std::atomic<uint64_t> errors{0};            // the manager misbehaved back (e.g. hung)
};

// Runs every misbehaviour until `deadline` (bench::NowSeconds clock).
// `uds` and `tcp` are client addresses, `rest` the REST API's http://HOST:PORT.
void Misbehave(const std::string& uds, const std::string& tcp, const std::string& rest,
               double deadline, MisbehaveTally* tally);

}  // namespace tierkv::soak

#endif  // TIERKV_BENCH_SOAK_MISBEHAVE_H_
