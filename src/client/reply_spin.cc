#include "client/reply_spin.h"

#include <algorithm>

namespace tierkv {

int ReplySpin::WindowUs(uint16_t opcode) const {
  if (cap_us_ <= 0) return 0;
  const int s = Slot(opcode);
  if (!seen_[s]) return std::min(cap_us_, kFirstUs);
  if (avg_us_[s] > cap_us_) return 0;
  return std::min(cap_us_, 2 * avg_us_[s] + kMarginUs);
}

void ReplySpin::Record(uint16_t opcode, int64_t took_us) {
  const int s = Slot(opcode);
  // One slow reply (a stall of the manager, a long sleep) weighs as at most a
  // second; the average then falls back by a quarter of the gap per reply.
  const int64_t took = std::clamp<int64_t>(took_us, 0, 1'000'000);
  if (!seen_[s]) {
    seen_[s] = true;
    avg_us_[s] = static_cast<int32_t>(took);
    return;
  }
  avg_us_[s] = static_cast<int32_t>((3 * static_cast<int64_t>(avg_us_[s]) + took) / 4);
}

}  // namespace tierkv
