// Test helper: a client connected with given options.
#ifndef TIERKV_TESTS_CLIENT_UTIL_H_
#define TIERKV_TESTS_CLIENT_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tierkv/client.h"

namespace tierkv::testing {

// A client of `address` with `options`; a test failure and nullptr when the
// connect fails.
inline std::unique_ptr<Client> ConnectWith(const std::string& address,
                                           const ClientOptions& options) {
  auto c = Client::Connect(address, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_CLIENT_UTIL_H_
