#include "store/quarantine.h"

namespace tierkv {

void Quarantine::Hold(uint64_t session, const Range& range) {
  std::lock_guard<std::mutex> lock(mu_);
  by_session_[session].push_back(range);
  bytes_ += range.first.size;
}

void Quarantine::Keep(uint64_t session, std::shared_ptr<void> held) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_[session].push_back(std::move(held));
}

std::vector<Quarantine::Range> Quarantine::Release(uint64_t session) {
  std::vector<std::shared_ptr<void>> kept;  // let go after the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (auto k = kept_.find(session); k != kept_.end()) {
    kept = std::move(k->second);
    kept_.erase(k);
  }
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
