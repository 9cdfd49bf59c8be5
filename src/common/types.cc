#include "tierkv/types.h"

namespace tierkv {

std::string_view MediumName(Medium medium) {
  switch (medium) {
    case Medium::kHbm:
      return "hbm";
    case Medium::kDram:
      return "dram";
    case Medium::kSsd:
      return "ssd";
  }
  return "unknown";
}

bool ValidNamespace(std::string_view ns) {
  constexpr std::string_view kPrefix = "tierkv:v1:";
  if (ns.empty()) return true;
  if (ns.size() != kPrefix.size() + 64 || !ns.starts_with(kPrefix)) return false;
  for (char c : ns.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace tierkv
