#include "http/http_head.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

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

// RFC 9110 token characters (method and field names).
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) == 0 &&
        std::string_view("!#$%&'*+-.^_`|~").find(ch) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

HeadParse Fail(HttpHead* head, int status, std::string message) {
  head->error_status = status;
  head->error_message = std::move(message);
  return HeadParse::kComplete;
}

// "METHOD SP target SP HTTP/1.x"; 0 when well formed, else the status to answer.
int CheckRequestLine(std::string_view line, std::string* message) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos ||
      !IsToken(line.substr(0, sp1)) || sp2 == sp1 + 1) {
    *message = "malformed request line (want METHOD SP target SP HTTP/1.1)";
    return 400;
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.1" || version == "HTTP/1.0") return 0;
  if (version.size() == 8 && version.starts_with("HTTP/") &&
      std::isdigit(static_cast<unsigned char>(version[5])) && version[6] == '.' &&
      std::isdigit(static_cast<unsigned char>(version[7]))) {
    *message = "HTTP version " + std::string(version.substr(5)) + " is not supported (use 1.1)";
    return 505;
  }
  *message = "malformed request line (want METHOD SP target SP HTTP/1.1)";
  return 400;
}

}  // namespace

HeadParse ParseHttpHead(std::string_view buf, HttpHead* head) {
  *head = HttpHead{};
  const size_t end = buf.find("\r\n\r\n");
  // A line feed without its carriage return: the head can never complete the
  // way the server reads it, so say so now instead of waiting for a timeout.
  const std::string_view scanned = buf.substr(0, end == std::string_view::npos ? buf.size() : end);
  for (size_t lf = scanned.find('\n'); lf != std::string_view::npos;
       lf = scanned.find('\n', lf + 1)) {
    if (lf == 0 || scanned[lf - 1] != '\r') {
      return Fail(head, 400, "request head lines must end with CRLF");
    }
  }
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
  std::string message;
  if (const int status = CheckRequestLine(request_line, &message); status != 0) {
    return Fail(head, status, std::move(message));
  }
  const bool http10 = request_line.ends_with("HTTP/1.0");
  bool keep_alive = false;
  bool have_length = false;
  rest.remove_prefix(first_eol + 2);
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    const size_t colon = line.find(':');
    // No colon, a name with spaces around it, or a folded line (obsolete line
    // folding starts with a space): refused, so no two parsers can read the
    // head differently.
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Fail(head, 400, "malformed header line");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (IEquals(name, "Content-Length")) {
      uint64_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size()) {
        return Fail(head, 400, "invalid Content-Length");
      }
      if (have_length && n != head->content_length) {
        return Fail(head, 400, "conflicting Content-Length headers");
      }
      have_length = true;
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
