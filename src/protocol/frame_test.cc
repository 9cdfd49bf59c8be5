#include "protocol/frame.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "protocol/codec.h"
#include "protocol/socket_io.h"

namespace tierkv::proto {
namespace {

TEST(Frame, HeaderRoundTrips) {
  FrameHeader h;
  h.flags = kFlagResponse;
  h.opcode = static_cast<uint16_t>(Opcode::kBatchGet);
  h.status = 3;
  h.request_id = 0x0123456789abcdefull;
  h.body_len = 77;
  uint8_t buf[kHeaderSize];
  EncodeHeader(h, buf);
  EXPECT_EQ(buf[0], 'T');
  EXPECT_EQ(buf[1], 'K');
  const FrameHeader d = DecodeHeader(buf);
  EXPECT_EQ(d.opcode, h.opcode);
  EXPECT_EQ(d.status, 3);
  EXPECT_EQ(d.request_id, h.request_id);
  EXPECT_EQ(d.body_len, 77u);
  EXPECT_TRUE(CheckHeader(d, 100).ok());
}

TEST(Frame, CheckHeaderRejectsMagicVersionAndLength) {
  FrameHeader h;
  h.magic = 0x1234;
  EXPECT_EQ(CheckHeader(h, 100).code(), Code::kProtocolError);
  h = FrameHeader();
  h.version = 9;
  Status st = CheckHeader(h, 100);
  EXPECT_EQ(st.code(), Code::kProtocolError);
  EXPECT_NE(st.message().find("version 9"), std::string::npos);
  h = FrameHeader();
  h.body_len = 101;
  EXPECT_EQ(CheckHeader(h, 100).code(), Code::kTooLarge);
}

TEST(Frame, FatalFrameCarriesCodeAndMessage) {
  const std::string f = FatalFrame(Status(Code::kTooLarge, "frame too big"));
  ASSERT_GT(f.size(), kHeaderSize);
  const FrameHeader h = DecodeHeader(reinterpret_cast<const uint8_t*>(f.data()));
  EXPECT_EQ(h.opcode, static_cast<uint16_t>(Opcode::kFatal));
  EXPECT_EQ(h.status, static_cast<uint16_t>(Code::kTooLarge));
  Reader r(std::string_view(f).substr(kHeaderSize));
  EXPECT_EQ(r.Str(), "frame too big");
  EXPECT_TRUE(r.done());
}

TEST(Address, ParsesUnixAndTcpForms) {
  EXPECT_EQ(ParseAddress("unix:/tmp/a.sock")->path, "/tmp/a.sock");
  EXPECT_EQ(ParseAddress("unix:///tmp/a.sock")->path, "/tmp/a.sock");
  EXPECT_EQ(ParseAddress("/run/x.sock")->kind, Address::Kind::kUnix);
  auto tcp = ParseAddress("tcp://127.0.0.1:7600");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->host, "127.0.0.1");
  EXPECT_EQ(tcp->port, 7600);
  EXPECT_EQ(ParseAddress("[::1]:80")->host, "::1");
  EXPECT_EQ(ParseAddress("[::1]:80")->ToString(), "tcp://[::1]:80");
  EXPECT_FALSE(ParseAddress("localhost").ok());
  EXPECT_FALSE(ParseAddress("tcp://h:99999").ok());
  EXPECT_FALSE(ParseAddress("tcp://:80").ok());
  EXPECT_FALSE(ParseAddress("unix:").ok());
}

}  // namespace
}  // namespace tierkv::proto

namespace tierkv::proto {
namespace {

TEST(OpcodeTableTest, EveryKindHasOneNameAndATracepoint) {
  std::set<std::string_view> names;
  int kinds = 0;
#define TIERKV_CHECK_KIND(name, value, wire, tracepoint)                        \
  ++kinds;                                                                      \
  EXPECT_EQ(OpcodeName(value), wire);                                           \
  EXPECT_EQ(OpcodeTracepoint(static_cast<uint16_t>(Opcode::name)), tracepoint); \
  EXPECT_TRUE(std::string_view(tracepoint).starts_with("TP_MMC_META_"));        \
  names.insert(OpcodeName(value));
  TIERKV_OPCODES(TIERKV_CHECK_KIND)
#undef TIERKV_CHECK_KIND
  EXPECT_EQ(names.size(), static_cast<size_t>(kinds));
  EXPECT_EQ(OpcodeName(17), "unknown");
  EXPECT_EQ(OpcodeTracepoint(17), "");
  EXPECT_EQ(OpcodeName(0xFFFF), "fatal");
  EXPECT_EQ(OpcodeTracepoint(0xFFFF), "");
}

}  // namespace
}  // namespace tierkv::proto
