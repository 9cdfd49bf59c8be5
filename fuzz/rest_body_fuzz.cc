// Fuzz target: the REST API's JSON bodies (/memory/*) and key lists.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/rest_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  tierkv::ChunkRequest c;
  (void)tierkv::ParseChunkRequest(in, &c);
  (void)tierkv::SplitKeys(in);
  return 0;
}
