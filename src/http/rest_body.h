// Parsing of REST request inputs, kept apart from HTTP so it can be tested and
// fuzzed on its own.
#ifndef TIERKV_HTTP_REST_BODY_H_
#define TIERKV_HTTP_REST_BODY_H_

#include <string>
#include <string_view>
#include <vector>

#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

// The JSON body of /memory/evict and /memory/prefetch.
struct ChunkRequest {
  std::vector<std::string> keys;                     // chunk_hashes: object keys
  std::string tenant = std::string(kDefaultTenant);  // tenant_id, optional
  bool has_locations = false;                        // evict: move one tier down
  std::string lookup_id;                             // prefetch: echoed back
};

// Parses and validates the body. INVALID_ARGUMENT with the message the API
// returns ("invalid JSON body: ...", "missing chunk_hashes", ...).
Status ParseChunkRequest(std::string_view body, ChunkRequest* out);

// Splits the `keys` parameter of /batch_query_keys at commas ("a,,b" has an
// empty middle key, which then reads as invalid).
std::vector<std::string> SplitKeys(std::string_view list);

}  // namespace tierkv

#endif  // TIERKV_HTTP_REST_BODY_H_
