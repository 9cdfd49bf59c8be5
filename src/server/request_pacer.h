// RequestPacer: how a session waits for its client's next request. Pure
// arithmetic over the gaps it was told; the Session does the waiting.
//
// Adaptive spin: a client in a tight loop (its gaps between requests are
// shorter than --spin-us) is polled for about twice its usual gap, at most
// --spin-us (proto::WaitAverage); an idle one is not. The gap is learnt per
// kind of the request just answered (the one after a LEASE comes once the
// client has copied the value, the one after a RELEASE at once); before a
// kind's first gap, the connection's overall pace counts.
//
// Paced: a client whose gap after this kind is longer than --spin-us, by at
// most kPacedGaps times and kPacedMaxUs, is awaited paced: asleep until
// spin_us / 2 before the request is due, then polled (a wake-up costs tens of
// microseconds on a virtual machine). Not before HELLO, whose wait the
// handshake deadline bounds.
//
// Otherwise the wait is a sleep of about twice the client's usual gap, at
// least kMinParkWaitMs (a client that pauses for a moment, to fault in its
// buffers say, keeps its worker) and at most `park_ms`; past it the
// connection is parked (its worker goes back to the pool).
//
// Thread-safety: none; one per session.
#ifndef TIERKV_SERVER_REQUEST_PACER_H_
#define TIERKV_SERVER_REQUEST_PACER_H_

#include <cstdint>

#include "protocol/socket_io.h"

namespace tierkv {

class RequestPacer {
 public:
  static constexpr int kMinParkWaitMs = 20;
  static constexpr int kPacedGaps = 8;
  static constexpr int kPacedMaxUs = kMinParkWaitMs * 1000;

  struct Plan {
    int spin_us = 0;       // poll this long first (0: do not)
    int paced_gap_us = 0;  // > 0: await paced, the request due in about this long
    int wait_ms = 0;       // then sleep at most this long (< 0: forever), then park
  };

  explicit RequestPacer(int spin_us) : spin_us_(spin_us) {}

  // The wait for the next request. `park_ms` < 0: never park.
  Plan Next(int park_ms, bool hello_done) const;
  // The next request came `gap_us` after the reply to the one before; it is
  // of kind `opcode`.
  void Record(int64_t gap_us, uint16_t opcode);

 private:
  const int spin_us_;
  proto::WaitAverage gap_{0};     // the wait for the next request, overall
  proto::WaitsByKind gap_after_;  // the same, per kind of the request before it
  uint16_t last_opcode_ = 0;      // the kind of the request answered last
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_REQUEST_PACER_H_
