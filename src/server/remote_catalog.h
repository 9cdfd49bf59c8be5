// RemoteCatalog: what a session asks when a lookup misses locally in cluster
// mode (the global index, seen from the server box; the manager wires it).
//
// Thread-safety: implementations are thread-safe; Lookup never blocks on I/O,
// Fetch blocks its caller (only), bounded by the read path's deadlines.
#ifndef TIERKV_SERVER_REMOTE_CATALOG_H_
#define TIERKV_SERVER_REMOTE_CATALOG_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/memory_piece.h"
#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

struct RemoteAnswer {
  enum Kind : uint8_t {
    kFound,       // `info` describes it; info.owner names the owner
    kAbsent,      // proved: every expected owner's view is complete and lacks it
    kUnknown,     // some expected owner's view is incomplete
    kOutOfScope,  // the caller's namespace is outside this manager's scope
  };
  Kind kind = kAbsent;
  ObjectInfo info;
  std::string why;  // for kUnknown / kOutOfScope
};

class RemoteCatalog {
 public:
  virtual ~RemoteCatalog() = default;
  // `name_space` is the asking session's ("" = none).
  virtual RemoteAnswer Lookup(std::string_view tenant, std::string_view key,
                              std::string_view name_space) const = 0;
  // Brings `keys` of `tenant` held by other managers into the local store
  // (the remote read path). One status per key, in order: OK when the key is
  // local now; NOT_FOUND with the reason otherwise. `superseded` (one per
  // key) gets, for a value its owner replaced while it was fetched, the
  // local generation of that copy (else 0): it is the caller's to read once
  // and then remove (StoreAdmin::RemoveIfAt), so that no later get is served it.
  virtual std::vector<Status> Fetch(std::string_view tenant, std::span<const std::string_view> keys,
                                    std::string_view name_space,
                                    std::vector<uint64_t>* superseded) const = 0;
  // Reads `keys` of `tenant` held by other managers straight into `dests`
  // (one per key), keeping no copy here. One result per key, in order: the
  // value's size once its bytes are in place and verified; NOT_FOUND with the
  // reason as Fetch; what IntoDest::Fits says when the value does not fit
  // (nothing read). On an error the destination may hold part of a value.
  virtual std::vector<Result<uint64_t>> FetchInto(std::string_view tenant,
                                                  std::span<const std::string_view> keys,
                                                  std::string_view name_space,
                                                  std::span<const IntoDest> dests) const = 0;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_REMOTE_CATALOG_H_
