#include "pki.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

namespace tierkv::testing {
namespace {

bool Run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

Pki::Pki() {
  static std::atomic<int> n{0};
  dir_ = std::filesystem::temp_directory_path() /
         ("tierkv-pki-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "san.ext") << "subjectAltName=IP:127.0.0.1\n";
}

Pki::~Pki() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool Pki::Ca(const std::string& name) {
  return Run(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1"
      " -subj /CN=" +
      name + " -keyout " + Path(name + ".key") + " -out " + Path(name + ".crt"));
}

bool Pki::Cert(const std::string& name, const std::string& ca) {
  return Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" +
             name + " -keyout " + Path(name + ".key") + " -out " + Path(name + ".csr")) &&
         Run("openssl x509 -req -days 1 -in " + Path(name + ".csr") + " -CA " + Path(ca + ".crt") +
             " -CAkey " + Path(ca + ".key") + " -CAcreateserial -extfile " + Path("san.ext") +
             " -out " + Path(name + ".crt"));
}

std::vector<std::string> Pki::Flags(const std::string& name, const std::string& ca) const {
  return {"--peer-tls-cert",   Path(name + ".crt"), "--peer-tls-key",
          Path(name + ".key"), "--peer-tls-ca",     Path(ca + ".crt")};
}

}  // namespace tierkv::testing
