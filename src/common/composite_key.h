// The index key of an object: "tenant\0key". Tenants never contain NUL, so
// this is unambiguous. Shared by the store and the cluster's global index.
#ifndef TIERKV_COMMON_COMPOSITE_KEY_H_
#define TIERKV_COMMON_COMPOSITE_KEY_H_

#include <string>
#include <string_view>

namespace tierkv {

inline std::string Composite(std::string_view tenant, std::string_view key) {
  std::string out;
  out.reserve(tenant.size() + 1 + key.size());
  out.append(tenant);
  out.push_back('\0');
  out.append(key);
  return out;
}

inline std::string_view TenantOf(std::string_view composite) {
  return composite.substr(0, composite.find('\0'));
}

inline std::string_view KeyOf(std::string_view composite) {
  return composite.substr(composite.find('\0') + 1);
}

}  // namespace tierkv

#endif  // TIERKV_COMMON_COMPOSITE_KEY_H_
