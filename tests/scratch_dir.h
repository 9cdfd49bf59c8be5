// ScratchDir: a directory of its own under /tmp (for an SSD tier, files a
// test makes), removed with everything in it when this goes out of scope.
//
// Thread-safety: one thread.
#ifndef TIERKV_TESTS_SCRATCH_DIR_H_
#define TIERKV_TESTS_SCRATCH_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tierkv::testing {

struct ScratchDir {
  ScratchDir() {
    char tmpl[] = "/tmp/tierkv-test-XXXXXX";
    path = mkdtemp(tmpl) != nullptr ? tmpl : "";
    EXPECT_FALSE(path.empty());
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // The path of `name` in it.
  std::string Sub(const std::string& name) const { return path + "/" + name; }
  std::string path;  // "" when it could not be made
};

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_SCRATCH_DIR_H_
