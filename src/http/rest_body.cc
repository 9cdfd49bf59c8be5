#include "http/rest_body.h"

#include <nlohmann/json.hpp>

namespace tierkv {

Status ParseChunkRequest(std::string_view body, ChunkRequest* out) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers too big for a double ("6e6666").
    return InvalidArgument(std::string("invalid JSON body: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgument("the JSON body must be an object");
  auto it = j.find("chunk_hashes");
  if (it == j.end()) return InvalidArgument("missing chunk_hashes");
  if (!it->is_array()) return InvalidArgument("chunk_hashes must be an array of strings");
  for (const auto& v : *it) {
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
      return InvalidArgument("chunk_hashes must be an array of non-empty strings");
    }
    out->keys.push_back(v.get<std::string>());
  }
  if (auto t = j.find("tenant_id"); t != j.end()) {
    if (!t->is_string()) return InvalidArgument("tenant_id must be a string");
    out->tenant = t->get<std::string>();
  }
  if (auto loc = j.find("locations"); loc != j.end() && !loc->is_null()) {
    if (!loc->is_array()) return InvalidArgument("locations must be an array");
    out->has_locations = true;
  }
  if (auto id = j.find("lookup_id"); id != j.end() && !id->is_null()) {
    if (!id->is_string()) return InvalidArgument("lookup_id must be a string");
    out->lookup_id = id->get<std::string>();
  }
  return Status::Ok();
}

std::vector<std::string> SplitKeys(std::string_view list) {
  std::vector<std::string> keys;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    keys.emplace_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return keys;
}

}  // namespace tierkv
