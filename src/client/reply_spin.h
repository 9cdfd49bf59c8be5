// ReplySpin: how long a client busy-polls for the reply to a request before it
// sleeps, learnt per request kind.
//
// A reply that comes while the caller polls costs no wake-up (tens of
// microseconds on a virtual machine, on both sides of the socket); polling
// for a reply that takes long burns the core for nothing. So each opcode keeps
// its own proto::WaitAverage of how long its replies took (the rule the
// manager's sessions use for the wait between requests): its replies are
// polled for about twice that plus a margin, at most `cap_us`, and a kind
// whose replies take the cap or longer on average is not polled for at all.
// A kind not yet seen is polled for kFirstUs (capped).
//
// Thread-safety: none (one per connection; the Client serialises access).
#ifndef TIERKV_CLIENT_REPLY_SPIN_H_
#define TIERKV_CLIENT_REPLY_SPIN_H_

#include <cstdint>

#include "protocol/socket_io.h"

namespace tierkv {

class ReplySpin {
 public:
  static constexpr int kFirstUs = 50;  // a kind with no replies yet
  static constexpr int kMarginUs = proto::WaitAverage::kMarginUs;

  explicit ReplySpin(int cap_us) : cap_us_(cap_us) {}

  // Microseconds to poll for the reply of `opcode` (0: sleep at once).
  int WindowUs(uint16_t opcode) const { return kinds_.of(opcode).PollUs(cap_us_, kFirstUs); }
  // Records that a reply of `opcode` came `took_us` after its request left.
  void Record(uint16_t opcode, int64_t took_us) { kinds_.of(opcode).Record(took_us); }

 private:
  const int cap_us_;
  proto::WaitsByKind kinds_;
};

}  // namespace tierkv

#endif  // TIERKV_CLIENT_REPLY_SPIN_H_
