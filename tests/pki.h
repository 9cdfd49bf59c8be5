// Pki: a scratch directory with certificate authorities and certificates
// they signed for 127.0.0.1, made with the openssl command, for managers'
// --peer-tls-* flags (tests and the cluster soak).
//
// Thread-safety: one thread.
#ifndef TIERKV_TESTS_PKI_H_
#define TIERKV_TESTS_PKI_H_

#include <filesystem>
#include <string>
#include <vector>

namespace tierkv::testing {

class Pki {
 public:
  Pki();   // a directory of its own under the temporary directory
  ~Pki();  // removes it
  Pki(const Pki&) = delete;
  Pki& operator=(const Pki&) = delete;

  // A self-signed CA `name`; false when openssl failed.
  bool Ca(const std::string& name);
  // A certificate `name` for 127.0.0.1 signed by CA `ca`; false when openssl
  // failed.
  bool Cert(const std::string& name, const std::string& ca);
  // --peer-tls-cert, --peer-tls-key and --peer-tls-ca for certificate
  // `name` and CA `ca`.
  std::vector<std::string> Flags(const std::string& name, const std::string& ca) const;
  std::string Path(const std::string& file) const { return (dir_ / file).string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_PKI_H_
