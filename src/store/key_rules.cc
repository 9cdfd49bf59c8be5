#include "store/key_rules.h"

#include <string>

namespace tierkv {

constexpr uint32_t kMaxTenantBytes = 128;

Status KeyRules::Tenant(std::string_view tenant) const {
  if (tenant.empty()) return InvalidArgument("tenant must not be empty");
  if (tenant.size() > kMaxTenantBytes) {
    return Status(Code::kTooLarge, "tenant is " + std::to_string(tenant.size()) +
                                       " bytes; the limit is " + std::to_string(kMaxTenantBytes));
  }
  if (tenant.find('\0') != std::string_view::npos) {
    return InvalidArgument("tenant must not contain NUL bytes");
  }
  return Status::Ok();
}

Status KeyRules::Key(std::string_view key) const {
  if (key.empty()) return InvalidArgument("key must not be empty");
  if (key.size() > max_key_bytes_) {
    return Status(Code::kTooLarge, "key is " + std::to_string(key.size()) +
                                       " bytes; the limit (max-key-bytes) is " +
                                       std::to_string(max_key_bytes_));
  }
  return Status::Ok();
}

Status KeyRules::Ref(const ObjectRef& ref) const {
  Status st = Tenant(ref.tenant);
  return st.ok() ? Key(ref.key) : st;
}

Status KeyRules::Put(std::string_view key, uint64_t size, const PutOptions& options) const {
  if (Status st = Key(key); !st.ok()) return st;
  if (size == 0) return InvalidArgument("size must be at least 1 byte");
  if (size > max_object_bytes_) {
    return Status(Code::kTooLarge, "value is " + std::to_string(size) +
                                       " bytes; the limit (max-object-bytes) is " +
                                       std::to_string(max_object_bytes_));
  }
  if (options.group_id.size() > max_group_bytes_) {
    return Status(Code::kTooLarge, "group_id is " + std::to_string(options.group_id.size()) +
                                       " bytes; the limit (max-group-bytes) is " +
                                       std::to_string(max_group_bytes_));
  }
  return Status::Ok();
}

}  // namespace tierkv
