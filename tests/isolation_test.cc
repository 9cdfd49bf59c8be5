// One client can never hurt another: grant ids are bound to the session that
// received them, and a foreign commit, abort or release changes nothing.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

#include "manager_process.h"
#include "raw_conn.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using proto::Opcode;
using testing::IdBody;
using testing::KeyBody;
using testing::ManagerProcess;
using testing::RawConn;
using testing::RawReply;

constexpr size_t kPool = 16u << 20;
constexpr size_t kSize = 64u << 10;

// A raw shared-memory writer: hello, then the pool mapped like the real client does.
class RawWriter {
 public:
  explicit RawWriter(const std::string& uds) : conn_(uds) {
    EXPECT_EQ(conn_.Hello().code(), Code::kOk);
    EXPECT_GE(conn_.pool_fd(), 0);
    base_ = static_cast<uint8_t*>(
        mmap(nullptr, kPool, PROT_READ | PROT_WRITE, MAP_SHARED, conn_.pool_fd(), 0));
    EXPECT_NE(base_, MAP_FAILED);
  }
  ~RawWriter() { munmap(base_, kPool); }
  proto::AllocReply Alloc(std::string_view key) {
    std::string body;
    proto::Writer w(&body);
    proto::AllocRequest{"default", key, kSize, "", 0}.Encode(w);
    RawReply r = conn_.Call(Opcode::kAlloc, body);
    EXPECT_EQ(r.code(), Code::kOk) << r.message();
    proto::Reader rd(r.body);
    return proto::DecodeAllocReply(rd);
  }
  proto::LeaseReply Lease(std::string_view key) {
    RawReply r = conn_.Call(Opcode::kLease, KeyBody("default", key));
    EXPECT_EQ(r.code(), Code::kOk) << r.message();
    proto::Reader rd(r.body);
    return proto::DecodeLeaseReply(rd);
  }
  Code IdCall(Opcode op, uint64_t id) { return conn_.Call(op, IdBody(id)).code(); }
  uint8_t* base() { return base_; }
  RawConn& conn() { return conn_; }

 private:
  RawConn conn_;
  uint8_t* base_ = nullptr;
};

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = std::make_unique<ManagerProcess>(std::vector<std::string>{"--dram-size", "16MiB"});
    auto c = Client::Connect(manager_->uds());
    ASSERT_TRUE(c.ok());
    innocent_ = std::move(*c);
  }
  std::unique_ptr<ManagerProcess> manager_;
  std::unique_ptr<Client> innocent_;
};

TEST_F(IsolationTest, AForeignCommitOrAbortLeavesAHalfWrittenPutAlone) {
  RawWriter writer(manager_->uds());
  RawWriter intruder(manager_->uds());
  const proto::AllocReply g = writer.Alloc("obj");
  std::memset(writer.base() + g.offset, 'A', kSize / 2);  // half of the value so far
  EXPECT_EQ(intruder.IdCall(Opcode::kCommit, g.alloc_id), Code::kNotFound);
  EXPECT_EQ(innocent_->Exist("obj").code(), Code::kNotFound);  // not readable half-written
  EXPECT_EQ(intruder.IdCall(Opcode::kAbort, g.alloc_id), Code::kNotFound);
  // The grant is still in flight, so an innocent upsert cannot take its range.
  EXPECT_EQ(innocent_->Upsert("obj", std::string(kSize, 'B')).code(), Code::kRetry);
  std::memset(writer.base() + g.offset + kSize / 2, 'A', kSize / 2);
  EXPECT_EQ(writer.IdCall(Opcode::kCommit, g.alloc_id), Code::kOk);
  auto v = innocent_->Get("obj");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::string(kSize, 'A'));
}

TEST_F(IsolationTest, AForeignReleaseDoesNotEndAReadersLease) {
  ASSERT_TRUE(innocent_->Put("obj", std::string(kSize, 'A')).ok());
  RawWriter reader(manager_->uds());
  RawWriter intruder(manager_->uds());
  const proto::LeaseReply l = reader.Lease("obj");
  EXPECT_EQ(intruder.IdCall(Opcode::kRelease, l.lease_id), Code::kNotFound);
  // The upsert must land elsewhere: the reader still holds the old range.
  ASSERT_TRUE(innocent_->Upsert("obj", std::string(kSize, 'B')).ok());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(reader.base() + l.offset), kSize),
            std::string(kSize, 'A'));
  EXPECT_EQ(reader.IdCall(Opcode::kRelease, l.lease_id), Code::kOk);
  auto v = innocent_->Get("obj");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::string(kSize, 'B'));
}

TEST_F(IsolationTest, ABatchOfForeignIdsIsRefusedItemByItem) {
  RawWriter writer(manager_->uds());
  RawWriter intruder(manager_->uds());
  const proto::AllocReply g = writer.Alloc("obj");
  std::string body;
  proto::Writer w(&body);
  w.U32(1);
  w.U64(g.alloc_id);
  RawReply r = intruder.conn().Call(Opcode::kBatchCommit, body);
  ASSERT_EQ(r.code(), Code::kOk);
  proto::Reader rd(r.body);
  ASSERT_EQ(rd.U32(), 1u);
  EXPECT_EQ(rd.ItemStatus().code(), Code::kNotFound);
  EXPECT_EQ(writer.IdCall(Opcode::kCommit, g.alloc_id), Code::kOk);
}

}  // namespace
}  // namespace tierkv
