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

}  // namespace
}  // namespace tierkv
