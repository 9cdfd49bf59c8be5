// EtcdMetadataStore: the REST /metadata store in cluster mode, kept in etcd
// under /tierkv/v1/<cluster>/metadata/ so every manager answers the same.
//
// Errors: NOT_FOUND (absent), TOO_LARGE (key + value over what one etcd request
// may carry, kMaxValueBytes), UNAVAILABLE (etcd did not answer).
//
// Thread-safety: thread-safe.
#ifndef TIERKV_CLUSTER_ETCD_METADATA_H_
#define TIERKV_CLUSTER_ETCD_METADATA_H_

#include <string>

#include "etcd/etcd_client.h"
#include "meta/metadata_store.h"

namespace tierkv {

class EtcdMetadataStore final : public MetadataStore {
 public:
  // etcd refuses requests over 1.5 MiB; this leaves room for the key and framing.
  static constexpr size_t kMaxValueBytes = (3u << 19) - (16u << 10);

  EtcdMetadataStore(etcd::Client* client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}

  Result<std::string> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;

 private:
  etcd::Client* const client_;
  const std::string prefix_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_ETCD_METADATA_H_
