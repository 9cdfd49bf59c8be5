// Bad input never crashes or stalls the manager: each case gets its documented
// error, only a connection whose byte stream is unusable is closed, and other
// clients keep being served.
#include <gtest/gtest.h>

#include <thread>

#include "manager_process.h"
#include "raw_conn.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using proto::Opcode;
using testing::ManagerProcess;
using testing::RawConn;
using testing::RawReply;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = std::make_unique<ManagerProcess>(std::vector<std::string>{
        "--dram-size", "8MiB", "--max-object-bytes", "6MiB", "--io-timeout-ms", "300"});
    auto c = Client::Connect(manager_->uds());
    ASSERT_TRUE(c.ok());
    good_ = std::move(*c);
    ASSERT_TRUE(good_->Put("canary", "still here").ok());
  }
  // The well-behaved client and its data are untouched.
  void ExpectHealthy() {
    auto v = good_->Get("canary");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, "still here");
    auto fresh = Client::Connect(manager_->tcp());
    ASSERT_TRUE(fresh.ok());
    EXPECT_TRUE((*fresh)->Exist("canary").ok());
  }
  std::unique_ptr<ManagerProcess> manager_;
  std::unique_ptr<Client> good_;
};

TEST_F(BadInputTest, BadMagicGetsAFatalFrameAndIsClosed) {
  RawConn c(manager_->tcp());
  c.SendBytes(std::string(24, 'Z'));
  RawReply r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.header.opcode, static_cast<uint16_t>(Opcode::kFatal));
  EXPECT_EQ(r.code(), Code::kProtocolError);
  EXPECT_NE(r.message().find("magic"), std::string::npos);
  EXPECT_TRUE(c.ClosedWithin(2000));
  ExpectHealthy();
}

TEST_F(BadInputTest, UnknownVersionIsRefusedByName) {
  RawConn c(manager_->uds());
  proto::FrameHeader h;
  h.version = 7;
  h.opcode = static_cast<uint16_t>(Opcode::kHello);
  std::string frame;
  proto::AppendFrame(&frame, h, "");
  c.SendBytes(frame);
  RawReply r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.code(), Code::kProtocolError);
  EXPECT_NE(r.message().find("version 7"), std::string::npos);
  EXPECT_TRUE(c.ClosedWithin(2000));
  ExpectHealthy();
}

TEST_F(BadInputTest, LyingLengthIsRefusedBeforeAnythingIsAllocated) {
  RawConn c(manager_->tcp());
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(Opcode::kPut);
  h.body_len = 0xFFFFFFF0u;  // 4 GiB body announced, never sent
  uint8_t hdr[proto::kHeaderSize];
  proto::EncodeHeader(h, hdr);
  c.SendBytes(std::string_view(reinterpret_cast<char*>(hdr), sizeof(hdr)));
  RawReply r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.code(), Code::kTooLarge);
  EXPECT_TRUE(c.ClosedWithin(2000));
  ExpectHealthy();
}

TEST_F(BadInputTest, UnknownOpcodeAndTruncatedBodiesKeepTheConnection) {
  RawConn c(manager_->tcp());
  RawReply r = c.Call(static_cast<Opcode>(999), "xyz", 5);
  EXPECT_EQ(r.code(), Code::kNotSupported);
  EXPECT_NE(r.message().find("999"), std::string::npos);
  // A tenant string that claims 5 bytes but has 2: it runs off the end.
  r = c.Call(Opcode::kGet, std::string("\x05\x00\x00\x00", 4) + "ab", 6);
  EXPECT_EQ(r.code(), Code::kProtocolError);
  std::string batch;
  proto::Writer w(&batch);
  w.Str("default");
  w.U32(0x7FFFFFFF);  // a batch "count" the body cannot hold
  r = c.Call(Opcode::kBatchExist, batch, 7);
  EXPECT_EQ(r.code(), Code::kProtocolError);
  // The same connection still works.
  r = c.Call(Opcode::kExist, testing::KeyBody("default", "canary"), 8);
  EXPECT_EQ(r.code(), Code::kOk);
  ExpectHealthy();
}

TEST_F(BadInputTest, KeyAndValueLimitsGiveClearErrors) {
  auto c = Client::Connect(manager_->tcp());
  ASSERT_TRUE(c.ok());
  Status st = (*c)->Put(std::string(2000, 'k'), "v");
  EXPECT_EQ(st.code(), Code::kTooLarge);
  EXPECT_NE(st.message().find("max-key-bytes"), std::string::npos);
  EXPECT_EQ((*c)->Put("", "v").code(), Code::kInvalidArgument);
  EXPECT_EQ((*c)->Put("k", "v", {"", {}}).code(), Code::kInvalidArgument);  // empty tenant
  st = (*c)->Put("big", std::string(7 << 20, 'x'));
  EXPECT_EQ(st.code(), Code::kTooLarge);
  EXPECT_NE(st.message().find("max-object-bytes"), std::string::npos);
  EXPECT_EQ(good_->Put("big", std::string(7 << 20, 'x')).code(), Code::kTooLarge);
  EXPECT_EQ(good_->Get(std::string(2000, 'k')).code(), Code::kTooLarge);
  ExpectHealthy();
}

TEST_F(BadInputTest, LongGroupIdsAreTooLargeAtPutTime) {
  for (const std::string& address : {manager_->uds(), manager_->tcp()}) {
    auto c = Client::Connect(address);
    ASSERT_TRUE(c.ok());
    const std::string group(100000, 'g');
    Status st = (*c)->Put("grouped", "v", {.group_id = group});
    EXPECT_EQ(st.code(), Code::kTooLarge) << address;
    EXPECT_NE(st.message().find("max-group-bytes"), std::string::npos);
    PutItem item{"grouped", "v", 1, group};
    EXPECT_EQ((*c)->BatchPut(std::span(&item, 1))[0].code(), Code::kTooLarge);
    EXPECT_EQ((*c)->Exist("grouped").code(), Code::kNotFound);
    EXPECT_TRUE((*c)->Put("grouped", "v", {.group_id = std::string(256, 'g')}).ok());
    ASSERT_TRUE((*c)->Remove("grouped").ok());
  }
  ExpectHealthy();
}

TEST_F(BadInputTest, UnknownPutFlagBitsAreRefused) {
  RawConn c(manager_->tcp());
  std::string body;
  proto::Writer w(&body);
  proto::PutRequest{"default", "flagged", "", /*flags=*/0x82, "v"}.Encode(w);
  RawReply r = c.Call(Opcode::kPut, body);
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  EXPECT_NE(r.message().find("unknown flag bits 0x82"), std::string::npos) << r.message();
  std::string batch;
  proto::Writer bw(&batch);
  bw.Str("default");
  bw.U32(1);
  bw.Str("flagged");
  bw.Str("");
  bw.U8(0x04);
  bw.Str("v");
  EXPECT_EQ(c.Call(Opcode::kBatchPut, batch, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(c.Call(Opcode::kExist, testing::KeyBody("default", "flagged"), 3).code(),
            Code::kNotFound);
  ExpectHealthy();
}

TEST_F(BadInputTest, AllocAndLeaseAreRefusedOverTcp) {
  RawConn c(manager_->tcp());
  std::string body;
  proto::Writer w(&body);
  proto::AllocRequest{"default", "k", 10, "", 0}.Encode(w);
  RawReply r = c.Call(Opcode::kAlloc, body);
  EXPECT_EQ(r.code(), Code::kNotSupported);
  r = c.Call(Opcode::kLease, testing::KeyBody("default", "canary"), 2);
  EXPECT_EQ(r.code(), Code::kNotSupported);
}

TEST_F(BadInputTest, ClientVanishingMidPutLeaksNothing) {
  {
    RawConn c(manager_->uds());
    std::string body;
    proto::Writer w(&body);
    proto::AllocRequest{"default", "half-written", 6 << 20, "", 0}.Encode(w);
    RawReply r = c.Call(Opcode::kAlloc, body);
    ASSERT_EQ(r.code(), Code::kOk);
  }  // closed without commit
  // The 6 MiB reservation is returned: another 6 MiB put fits in the 8 MiB pool
  // (after the manager notices the close).
  Status st;
  for (int i = 0; i < 100; ++i) {
    st = good_->Put("after", std::string(6 << 20, 'a'));
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(good_->Exist("half-written").code(), Code::kNotFound);
}

TEST_F(BadInputTest, ClientVanishingMidGetReleasesItsLease) {
  ASSERT_TRUE(good_->Put("leased", std::string(6 << 20, 'l')).ok());
  {
    RawConn c(manager_->uds());
    RawReply r = c.Call(Opcode::kLease, testing::KeyBody("default", "leased"));
    ASSERT_EQ(r.code(), Code::kOk);
  }  // closed while holding the lease (default lease 2 s)
  ASSERT_TRUE(good_->Remove("leased").ok());
  Status st;
  for (int i = 0; i < 50; ++i) {  // well before the 2 s lease would end on its own
    st = good_->Put("next", std::string(6 << 20, 'n'));
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(BadInputTest, StalledMidFrameIsDroppedOthersUnaffected) {
  RawConn c(manager_->tcp());
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(Opcode::kPut);
  h.body_len = 100;
  uint8_t hdr[proto::kHeaderSize];
  proto::EncodeHeader(h, hdr);
  c.SendBytes(std::string_view(reinterpret_cast<char*>(hdr), sizeof(hdr)));
  c.SendBytes("only ten b");
  ExpectHealthy();                    // served while the stalled one waits
  EXPECT_TRUE(c.ClosedWithin(5000));  // --io-timeout-ms 300
  ExpectHealthy();
}

TEST_F(BadInputTest, ResponseFramesFromClientsAreRejected) {
  RawConn c(manager_->tcp());
  proto::FrameHeader h;
  h.flags = proto::kFlagResponse;
  h.opcode = static_cast<uint16_t>(Opcode::kExist);
  std::string frame;
  proto::AppendFrame(&frame, h, testing::KeyBody("default", "canary"));
  c.SendBytes(frame);
  RawReply r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.code(), Code::kProtocolError);
  ExpectHealthy();
}

}  // namespace
}  // namespace tierkv
