#include "http/http_head.h"

#include <strings.h>

#include <algorithm>
#include <charconv>

namespace tierkv {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// True when the comma list `value` holds `token` (case-insensitive).
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (IEquals(Trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

HeadParse ParseHttpHead(std::string_view buf, HttpHead* head) {
  *head = HttpHead{};
  const size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > kMaxHttpHeadBytes) {
    if (buf.size() > kMaxHttpHeadBytes) {
      head->error_status = 431;
      head->error_message = "request head larger than 64 KiB";
    }
    return HeadParse::kIncomplete;
  }
  head->head_bytes = end + 4;
  std::string_view rest = buf.substr(0, end + 2);
  const size_t first_eol = rest.find("\r\n");
  const std::string_view request_line = rest.substr(0, first_eol);
  const bool http10 = request_line.ends_with("HTTP/1.0");
  bool keep_alive = false;
  rest.remove_prefix(first_eol + 2);
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the routes answer malformed lines
    const std::string_view name = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (IEquals(name, "Content-Length")) {
      uint64_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size()) {
        head->error_status = 400;
        head->error_message = "invalid Content-Length";
        return HeadParse::kComplete;
      }
      head->content_length = n;
    } else if (IEquals(name, "Transfer-Encoding")) {
      head->chunked = !IEquals(value, "identity");
    } else if (IEquals(name, "Connection")) {
      head->close = head->close || HasToken(value, "close");
      keep_alive = keep_alive || HasToken(value, "keep-alive");
    } else if (IEquals(name, "Expect")) {
      head->expect_continue = IEquals(value, "100-continue");
    }
  }
  if (http10 && !keep_alive) head->close = true;
  if (head->chunked) {
    head->error_status = 411;
    head->error_message = "chunked request bodies are not supported; send Content-Length";
  }
  return HeadParse::kComplete;
}

}  // namespace tierkv
