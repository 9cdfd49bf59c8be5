// Fuzz target: the manager's configuration: the input is a TOML/INI config
// file given with --config; every outcome must be a config or a named error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "manager/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input goes through a real file, removed when the fuzzer exits.
  static const struct TempFile {
    std::string path = "/tmp/tierkv-config-fuzz-" + std::to_string(getpid()) + ".toml";
    ~TempFile() { unlink(path.c_str()); }
  } file;
  const std::string& path = file.path;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  bool exit_now = false;
  std::string message;
  auto r = tierkv::ParseManagerConfig({"--config", path}, &exit_now, &message);
  if (!r.ok() && r.status().message().empty()) __builtin_trap();  // errors must say why
  return 0;
}
