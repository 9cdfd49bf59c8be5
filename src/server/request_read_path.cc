// RequestHandler's read path: a lease of the local value, or of a copy the
// cluster fetched from the owner, and lookups the cluster answers.
#include "protocol/messages.h"
#include "server/request_handler.h"

namespace tierkv {

Result<LeaseGrant> RequestHandler::LeaseOrFetch(std::string_view tenant, std::string_view key,
                                                ReadHold hold) {
  Store* store = ctx_.store;
  Result<LeaseGrant> g = store->Lease(caller_, {tenant, key}, hold);
  const RemoteCatalog* catalog = ctx_.catalog;
  if (g.ok() || g.status().code() != Code::kNotFound || catalog == nullptr) return g;
  const std::string_view one[] = {key};
  // A fetched copy can be dropped before it is read here (its owner replaced
  // or removed the value meanwhile, cluster/copy_tracker.h): fetch again.
  std::vector<uint64_t> superseded;
  for (int round = 0; round < kFetchRounds; ++round) {
    Status fetched =
        std::move(catalog->Fetch(tenant, one, caller_.name_space, &superseded).front());
    if (!fetched.ok()) return fetched;
    // A lease: a superseded copy is read under it, never served again.
    g = store->Lease(caller_, {tenant, key}, superseded[0] != 0 ? ReadHold::kLease : hold);
    if (superseded[0] != 0) (void)store->admin().RemoveIfAt({tenant, key}, superseded[0]);
    if (g.ok() || g.status().code() != Code::kNotFound) break;
  }
  return g;
}

std::vector<Result<LeaseGrant>> RequestHandler::BatchLeaseOrFetch(
    std::string_view tenant, std::span<const std::string_view> keys, ReadHold hold) {
  Store* store = ctx_.store;
  std::vector<Result<LeaseGrant>> grants = store->BatchLease(caller_, tenant, keys, hold);
  const RemoteCatalog* catalog = ctx_.catalog;
  if (catalog == nullptr) return grants;
  std::vector<size_t> missed;
  std::vector<std::string_view> missed_keys;
  for (size_t i = 0; i < grants.size(); ++i) {
    if (!grants[i].ok() && grants[i].status().code() == Code::kNotFound) {
      missed.push_back(i);
      missed_keys.push_back(keys[i]);
    }
  }
  // As LeaseOrFetch: a key whose fetched copy went before it was read is
  // fetched again.
  std::vector<uint64_t> superseded;
  for (int round = 0; round < kFetchRounds && !missed.empty(); ++round) {
    std::vector<Status> fetched =
        catalog->Fetch(tenant, missed_keys, caller_.name_space, &superseded);
    std::vector<size_t> again;
    std::vector<std::string_view> again_keys;
    for (size_t j = 0; j < missed.size(); ++j) {
      if (!fetched[j].ok()) {
        grants[missed[j]] = std::move(fetched[j]);
        continue;
      }
      const ObjectRef ref{tenant, missed_keys[j]};
      grants[missed[j]] = store->Lease(caller_, ref, superseded[j] != 0 ? ReadHold::kLease : hold);
      if (superseded[j] != 0) (void)store->admin().RemoveIfAt(ref, superseded[j]);
      if (!grants[missed[j]].ok() && grants[missed[j]].status().code() == Code::kNotFound) {
        again.push_back(missed[j]);
        again_keys.push_back(missed_keys[j]);
      }
    }
    missed = std::move(again);
    missed_keys = std::move(again_keys);
  }
  return grants;
}

Result<ObjectInfo> RequestHandler::Lookup(std::string_view tenant, std::string_view key,
                                          uint8_t flags, Result<ObjectInfo> local) const {
  const RemoteCatalog* catalog = ctx_.catalog;
  if (local.ok() || local.status().code() != Code::kNotFound || catalog == nullptr ||
      (flags & proto::kLookupLocalOnly) != 0) {
    return local;
  }
  RemoteAnswer a = catalog->Lookup(tenant, key, caller_.name_space);
  switch (a.kind) {
    case RemoteAnswer::kFound:
      return std::move(a.info);
    case RemoteAnswer::kAbsent:
      return NotFound("not found on any manager of the cluster");
    case RemoteAnswer::kUnknown:
      return Status(Code::kUnavailable, "not found here; elsewhere unknown: " + a.why);
    case RemoteAnswer::kOutOfScope:
      return Status(Code::kUnavailable, "not found here; out of this manager's scope: " + a.why);
  }
  return local;
}

}  // namespace tierkv
