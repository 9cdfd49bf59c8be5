#include "cluster/etcd_metadata.h"

namespace tierkv {

Result<std::string> EtcdMetadataStore::Get(std::string_view key) {
  Result<etcd::RangeResult> r = client_->Get(prefix_ + std::string(key));
  if (!r.ok()) return r.status();
  if (r->kvs.empty()) return NotFound("metadata key '" + std::string(key) + "' not found");
  return std::move(r->kvs[0].value);
}

Status EtcdMetadataStore::Put(std::string_view key, std::string_view value) {
  if (key.size() + value.size() > kMaxValueBytes) {
    return Status(Code::kTooLarge,
                  "metadata key and value of " + std::to_string(key.size() + value.size()) +
                      " bytes exceed the cluster limit of " + std::to_string(kMaxValueBytes) +
                      " bytes (etcd request limit)");
  }
  Result<int64_t> r = client_->Put(prefix_ + std::string(key), std::string(value));
  return r.ok() ? Status::Ok() : r.status();
}

Status EtcdMetadataStore::Delete(std::string_view key) {
  Result<int64_t> r = client_->Delete(prefix_ + std::string(key));
  if (!r.ok()) return r.status();
  if (*r == 0) return NotFound("metadata key '" + std::string(key) + "' not found");
  return Status::Ok();
}

}  // namespace tierkv
