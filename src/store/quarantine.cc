#include "store/quarantine.h"

namespace tierkv {

void Quarantine::Hold(uint64_t session, const Range& range) {
  std::lock_guard<std::mutex> lock(mu_);
  by_session_[session].push_back(range);
  bytes_ += range.first.size;
}

std::vector<Quarantine::Range> Quarantine::Release(uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return {};
  std::vector<Range> ranges = std::move(it->second);
  by_session_.erase(it);
  for (const Range& r : ranges) bytes_ -= r.first.size;
  return ranges;
}

uint64_t Quarantine::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace tierkv
