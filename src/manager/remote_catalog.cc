#include "manager/remote_catalog.h"

namespace tierkv {

std::string IndexCatalog::OutOfScope(std::string_view name_space) const {
  if (scope_kind_ == "empty" || (scope_kind_ == "exact" && scope_.count(name_space) == 0)) {
    return name_space.empty() ? "objects without a namespace are not subscribed"
                              : "namespace " + std::string(name_space) + " is not subscribed";
  }
  return {};
}

std::vector<Status> IndexCatalog::Fetch(std::string_view tenant,
                                        std::span<const std::string_view> keys,
                                        std::string_view name_space,
                                        std::vector<uint64_t>* superseded) const {
  std::string why = OutOfScope(name_space);
  if (fetcher_ == nullptr) why = "remote reads are off";
  if (!why.empty()) return std::vector<Status>(keys.size(), NotFound("not found here; " + why));
  return fetcher_->Fetch(tenant, keys, superseded);
}

std::vector<Result<uint64_t>> IndexCatalog::FetchInto(std::string_view tenant,
                                                      std::span<const std::string_view> keys,
                                                      std::string_view name_space,
                                                      std::span<const IntoDest> dests) const {
  std::string why = OutOfScope(name_space);
  if (fetcher_ == nullptr) why = "remote reads are off";
  if (!why.empty()) {
    return std::vector<Result<uint64_t>>(keys.size(), NotFound("not found here; " + why));
  }
  return fetcher_->FetchInto(tenant, keys, dests);
}

RemoteAnswer IndexCatalog::Lookup(std::string_view tenant, std::string_view key,
                                  std::string_view name_space) const {
  RemoteAnswer a;
  if (std::string why = OutOfScope(name_space); !why.empty()) {
    a.kind = RemoteAnswer::kOutOfScope;
    a.why = std::move(why);
    return a;
  }
  const IndexLookup found = index_->Lookup(tenant, key);
  if (found.locations.empty()) {
    a.kind = found.absence_proved ? RemoteAnswer::kAbsent : RemoteAnswer::kUnknown;
    if (!found.absence_proved) a.why = "the view of " + found.incomplete_owner + " is incomplete";
    return a;
  }
  // Prefer an owner with the value in DRAM, then one whose view is complete.
  const RemoteLocation* best = &found.locations.front();
  auto score = [](const RemoteLocation& l) {
    return (l.medium == Medium::kDram ? 2 : 0) + (l.complete ? 1 : 0);
  };
  for (const RemoteLocation& l : found.locations) {
    if (score(l) > score(*best)) best = &l;
  }
  a.kind = RemoteAnswer::kFound;
  a.info.size = best->size;
  a.info.state = ReplicaState::kReadable;
  a.info.name_space = best->name_space;
  a.info.owner = best->owner;
  a.info.owner_rank = best->rank;
  for (const RemoteLocation& l : found.locations) {
    if (l.owner == best->owner) a.info.media |= MediumBit(l.medium);
  }
  return a;
}

}  // namespace tierkv
