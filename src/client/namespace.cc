// DeriveNamespace: canonical JSON of the inputs, SHA-256, "tierkv:v1:" + hex.
// The JSON is what Python's json.dumps(inputs, sort_keys=True,
// separators=(",", ":"), ensure_ascii=False) writes, so both clients agree.
#include <openssl/evp.h>

#include <cstdio>
#include <string>

#include "tierkv/client.h"

namespace tierkv {
namespace {

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);  // UTF-8 passes through
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string DeriveNamespace(const std::map<std::string, std::string>& inputs) {
  std::string json = "{";
  for (const auto& [k, v] : inputs) {  // std::map: keys sorted bytewise, as Python sorts str
    if (json.size() > 1) json.push_back(',');
    AppendJsonString(k, &json);
    json.push_back(':');
    AppendJsonString(v, &json);
  }
  json.push_back('}');
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(json.data(), json.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "tierkv:v1:";
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

}  // namespace tierkv
