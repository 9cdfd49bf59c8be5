#include "http/http_head.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

TEST(HttpHead, IncompleteUntilTheBlankLine) {
  HttpHead h;
  EXPECT_EQ(ParseHttpHead("GET / HTTP/1.1\r\nHost: x\r\n", &h), HeadParse::kIncomplete);
  EXPECT_EQ(h.error_status, 0);
  EXPECT_EQ(ParseHttpHead("GET / HTTP/1.1\r\nHost: x\r\n\r\nrest", &h), HeadParse::kComplete);
  EXPECT_EQ(h.head_bytes, 27u);
  EXPECT_EQ(h.content_length, 0u);
  EXPECT_FALSE(h.close);
}

TEST(HttpHead, HeadersAreCaseInsensitiveAndListsAreSplit) {
  HttpHead h;
  ASSERT_EQ(ParseHttpHead("POST /a HTTP/1.1\r\ncontent-length:  12 \r\nCONNECTION: TE, Close\r\n"
                          "expect: 100-Continue\r\n\r\n",
                          &h),
            HeadParse::kComplete);
  EXPECT_EQ(h.content_length, 12u);
  EXPECT_TRUE(h.close);
  EXPECT_TRUE(h.expect_continue);
}

TEST(HttpHead, Http10ClosesUnlessKeptAlive) {
  HttpHead h;
  ParseHttpHead("GET / HTTP/1.0\r\n\r\n", &h);
  EXPECT_TRUE(h.close);
  ParseHttpHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &h);
  EXPECT_FALSE(h.close);
}

TEST(HttpHead, BadLengthsChunkedAndHugeHeadsAreErrors) {
  HttpHead h;
  ParseHttpHead("POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", &h);
  EXPECT_EQ(h.error_status, 400);
  ParseHttpHead("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &h);
  EXPECT_EQ(h.error_status, 400);
  ParseHttpHead("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &h);
  EXPECT_EQ(h.error_status, 411);
  ParseHttpHead("POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", &h);
  EXPECT_EQ(h.error_status, 0);
  const std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(kMaxHttpHeadBytes, 'a');
  EXPECT_EQ(ParseHttpHead(huge, &h), HeadParse::kIncomplete);
  EXPECT_EQ(h.error_status, 431);
}

// What two parsers could read differently is refused: each is an error the
// gate answers and then closes the connection.
TEST(HttpHead, AmbiguousOrMalformedHeadsAreRefused) {
  HttpHead h;
  struct Case {
    const char* head;
    int status;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"PUT / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\n", 400},
           {"GET / HTTP/1.1\nHost: x\n\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\n\r\n", 400},
           {"GET /health\r\n\r\n", 400},
           {"GET  / HTTP/1.1\r\n\r\n", 400},
           {"GET / HTTP/1.1 x\r\n\r\n", 400},
           {"G@T / HTTP/1.1\r\n\r\n", 400},
           {"GET / HTTX/1.1\r\n\r\n", 400},
           {"GET / HTTP/2.0\r\n\r\n", 505},
           {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nContent-Length : 3\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\n: empty\r\n\r\n", 400},
       }) {
    ParseHttpHead(c.head, &h);
    EXPECT_EQ(h.error_status, c.status) << c.head;
    EXPECT_FALSE(h.error_message.empty()) << c.head;
  }
  // The same length twice is one length.
  ASSERT_EQ(ParseHttpHead("PUT / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n", &h),
            HeadParse::kComplete);
  EXPECT_EQ(h.error_status, 0);
  EXPECT_EQ(h.content_length, 3u);
  // A bare LF is refused before the head completes (no wait for a timeout).
  ParseHttpHead("GET / HTTP/1.1\nHost", &h);
  EXPECT_EQ(h.error_status, 400);
}

}  // namespace
}  // namespace tierkv
