// Round-trips one object through a tierkv manager:
//   tierkv_example [ADDRESS]   (default unix:/tmp/tierkv.sock)
#include <tierkv/client.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "unix:/tmp/tierkv.sock";
  auto client = tierkv::Client::Connect(address);
  if (!client.ok()) {
    std::fprintf(stderr, "connect %s: %s\n", address.c_str(), client.status().ToString().c_str());
    return 1;
  }
  const std::string value(1 << 20, 'x');
  if (tierkv::Status st = (*client)->Upsert("example/one-mib", value); !st.ok()) {
    std::fprintf(stderr, "put: %s\n", st.ToString().c_str());
    return 1;
  }
  tierkv::Result<std::string> back = (*client)->Get("example/one-mib");
  if (!back.ok() || *back != value) {
    std::fprintf(stderr, "get: %s\n", back.ok() ? "wrong bytes" : back.status().ToString().c_str());
    return 1;
  }
  std::printf("round trip of %zu bytes through %s: ok\n", value.size(), address.c_str());
  return 0;
}
