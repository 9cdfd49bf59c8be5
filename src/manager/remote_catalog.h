// IndexCatalog: the session's RemoteCatalog in cluster mode: lookups answered
// from the global index within this manager's metadata scope, fetches run by
// the remote read path (cluster/fetcher.h) for keys in that scope.
//
// Thread-safety: thread-safe (the index is).
#ifndef TIERKV_MANAGER_REMOTE_CATALOG_H_
#define TIERKV_MANAGER_REMOTE_CATALOG_H_

#include <set>
#include <string>
#include <vector>

#include "cluster/fetcher.h"
#include "cluster/global_index.h"
#include "server/remote_catalog.h"

namespace tierkv {

class IndexCatalog final : public RemoteCatalog {
 public:
  // `fetcher` may be null (lookups only).
  IndexCatalog(const GlobalIndex* index, RemoteFetcher* fetcher, std::string scope_kind,
               const std::vector<std::string>& scope_namespaces)
      : index_(index),
        fetcher_(fetcher),
        scope_kind_(std::move(scope_kind)),
        scope_(scope_namespaces.begin(), scope_namespaces.end()) {}
  RemoteAnswer Lookup(std::string_view tenant, std::string_view key,
                      std::string_view name_space) const override;
  std::vector<Status> Fetch(std::string_view tenant, std::span<const std::string_view> keys,
                            std::string_view name_space,
                            std::vector<uint64_t>* superseded) const override;
  std::vector<Result<uint64_t>> FetchInto(std::string_view tenant,
                                          std::span<const std::string_view> keys,
                                          std::string_view name_space,
                                          std::span<const IntoDest> dests) const override;

 private:
  // Why `name_space` is outside the scope; empty when inside.
  std::string OutOfScope(std::string_view name_space) const;

  const GlobalIndex* const index_;
  RemoteFetcher* const fetcher_;
  const std::string scope_kind_;
  const std::set<std::string, std::less<>> scope_;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_REMOTE_CATALOG_H_
