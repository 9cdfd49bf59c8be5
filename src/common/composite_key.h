// The index key of an object: "tenant\0key". Tenants never contain NUL, so
// this is unambiguous. Shared by the store and the cluster's global index.
#ifndef TIERKV_COMMON_COMPOSITE_KEY_H_
#define TIERKV_COMMON_COMPOSITE_KEY_H_

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace tierkv {

inline size_t CompositeSize(std::string_view tenant, std::string_view key) {
  return tenant.size() + 1 + key.size();
}

// Writes the composite of (tenant, key) to `out` (CompositeSize bytes), for a
// caller that keeps it in a buffer of its own.
inline void WriteComposite(std::string_view tenant, std::string_view key, char* out) {
  std::memcpy(out, tenant.data(), tenant.size());
  out[tenant.size()] = '\0';
  std::memcpy(out + tenant.size() + 1, key.data(), key.size());
}

inline std::string Composite(std::string_view tenant, std::string_view key) {
  std::string out(CompositeSize(tenant, key), '\0');
  WriteComposite(tenant, key, out.data());
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
