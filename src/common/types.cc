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

}  // namespace tierkv
