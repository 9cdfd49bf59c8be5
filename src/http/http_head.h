// ParseHttpHead: the little the gate must know about an HTTP/1.x request head
// before the routes see it: where it ends, how long its body is, whether the
// connection closes after it, and whether the client waits for 100 Continue.
//
// Thread-safety: pure functions.
#ifndef TIERKV_HTTP_HTTP_HEAD_H_
#define TIERKV_HTTP_HTTP_HEAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierkv {

inline constexpr size_t kMaxHttpHeadBytes = 64 << 10;

struct HttpHead {
  size_t head_bytes = 0;        // through the blank line
  uint64_t content_length = 0;  // 0 without the header
  bool chunked = false;         // Transfer-Encoding other than identity
  bool close = false;           // Connection: close, or HTTP/1.0 without keep-alive
  bool expect_continue = false;
  int error_status = 0;  // non-zero: answer this status with error_message and close
  std::string error_message;
};

enum class HeadParse { kIncomplete, kComplete };

// Looks for a complete head at the start of `buf`. kIncomplete while the blank
// line has not arrived (error_status 431 once `buf` passes kMaxHttpHeadBytes);
// kComplete fills *head. Errors (error_status, with either result): 400 for a
// line ending in a bare LF, a malformed request line, a header line without a
// colon or with whitespace in or around its name (including folded lines), a
// malformed or conflicting Content-Length; 505 for an HTTP version other than
// 1.0 and 1.1; 411 for a chunked body.
HeadParse ParseHttpHead(std::string_view buf, HttpHead* head);

}  // namespace tierkv

#endif  // TIERKV_HTTP_HTTP_HEAD_H_
