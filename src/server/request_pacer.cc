#include "server/request_pacer.h"

#include <algorithm>

namespace tierkv {

RequestPacer::Plan RequestPacer::Next(int park_ms, bool hello_done) const {
  Plan plan;
  plan.wait_ms = park_ms < 0 ? park_ms
                             : std::clamp(2 * gap_.average_us() / 1000 + 1,
                                          std::min(kMinParkWaitMs, park_ms), park_ms);
  const proto::WaitAverage& after = gap_after_.of(last_opcode_);
  plan.spin_us = after.PollUs(spin_us_, gap_.PollUs(spin_us_));
  const bool paced = hello_done && plan.spin_us == 0 && spin_us_ > 0 &&
                     after.average_us() >= spin_us_ &&
                     after.average_us() <= std::min(kPacedGaps * spin_us_, kPacedMaxUs);
  if (paced) plan.paced_gap_us = after.average_us();
  return plan;
}

void RequestPacer::Record(int64_t gap_us, uint16_t opcode) {
  gap_.Record(gap_us);
  gap_after_.of(last_opcode_).Record(gap_us);
  last_opcode_ = opcode;
}

}  // namespace tierkv
