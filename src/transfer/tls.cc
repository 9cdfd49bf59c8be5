#include "transfer/tls.h"

#include <fstream>
#include <sstream>

namespace tierkv::transfer {

Result<std::string> ReadPem(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  if (in) out << in.rdbuf();
  if (!in || out.str().empty()) return InvalidArgument("cannot read " + what + " " + path);
  return out.str();
}

}  // namespace tierkv::transfer
