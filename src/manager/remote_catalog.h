// IndexCatalog: the session's RemoteCatalog in cluster mode, answered from the
// global index within this manager's metadata scope.
//
// Thread-safety: thread-safe (the index is).
#ifndef TIERKV_MANAGER_REMOTE_CATALOG_H_
#define TIERKV_MANAGER_REMOTE_CATALOG_H_

#include <set>
#include <string>
#include <vector>

#include "cluster/global_index.h"
#include "server/remote_catalog.h"

namespace tierkv {

class IndexCatalog final : public RemoteCatalog {
 public:
  IndexCatalog(const GlobalIndex* index, std::string scope_kind,
               const std::vector<std::string>& scope_namespaces)
      : index_(index),
        scope_kind_(std::move(scope_kind)),
        scope_(scope_namespaces.begin(), scope_namespaces.end()) {}
  RemoteAnswer Lookup(std::string_view tenant, std::string_view key,
                      std::string_view name_space) const override;

 private:
  const GlobalIndex* const index_;
  const std::string scope_kind_;
  const std::set<std::string, std::less<>> scope_;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_REMOTE_CATALOG_H_
