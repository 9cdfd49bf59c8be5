// KeyRules: what a tenant, a key and a put must be to enter the store (the
// limits of StoreOptions). The store checks every call with them; the
// protocol edge and the REST API check with the same rules before they call.
//
// Thread-safety: immutable after construction.
#ifndef TIERKV_STORE_KEY_RULES_H_
#define TIERKV_STORE_KEY_RULES_H_

#include <cstdint>
#include <string_view>

#include "store/store_types.h"
#include "tierkv/status.h"

namespace tierkv {

class KeyRules {
 public:
  explicit KeyRules(const StoreOptions& options)
      : max_key_bytes_(options.max_key_bytes),
        max_object_bytes_(options.max_object_bytes),
        max_group_bytes_(options.max_group_bytes) {}

  // INVALID_ARGUMENT (empty, NUL bytes) or TOO_LARGE.
  Status Tenant(std::string_view tenant) const;
  // INVALID_ARGUMENT (empty) or TOO_LARGE (max-key-bytes).
  Status Key(std::string_view key) const;
  // Tenant, then key.
  Status Ref(const ObjectRef& ref) const;
  // Key, size (at least 1 byte, at most max-object-bytes) and group_id
  // (max-group-bytes) of a put.
  Status Put(std::string_view key, uint64_t size, const PutOptions& options) const;

 private:
  const uint64_t max_key_bytes_;
  const uint64_t max_object_bytes_;
  const uint64_t max_group_bytes_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_KEY_RULES_H_
