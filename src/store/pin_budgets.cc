#include "store/pin_budgets.h"

#include <string>

namespace tierkv {

Result<uint64_t> PinBudgets::Add(uint64_t owner, const void* replica, uint64_t bytes,
                                 uint64_t budget, const std::function<uint64_t()>& make_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Owner& o = owners_[owner];
  uint32_t& refs = o.replicas[replica];
  if (refs == 0) {
    if (budget != 0 && o.bytes + bytes > budget) {
      o.replicas.erase(replica);
      if (o.ids.empty()) owners_.erase(owner);
      return Status(Code::kNoSpace,
                    "the pin budget of this owner is spent (" + std::to_string(budget) + " bytes)");
    }
    o.bytes += bytes;
  }
  ++refs;
  const uint64_t id = make_id();
  o.ids.insert(id);
  return id;
}

void PinBudgets::Remove(uint64_t owner, const void* replica, uint64_t bytes, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Owner& o = owners_[owner];
  o.ids.erase(id);
  auto r = o.replicas.find(replica);
  if (r != o.replicas.end() && --r->second == 0) {
    o.bytes -= bytes;
    o.replicas.erase(r);
  }
  if (o.ids.empty()) owners_.erase(owner);
}

std::vector<uint64_t> PinBudgets::Ids(uint64_t owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end()) return {};
  return {it->second.ids.begin(), it->second.ids.end()};
}

uint64_t PinBudgets::Bytes(uint64_t owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(owner);
  return it == owners_.end() ? 0 : it->second.bytes;
}

}  // namespace tierkv
