// One client can never hurt another: grant ids are bound to the session that
// received them, and a foreign commit, abort or release changes nothing.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

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

// --- Connections: idle ones cost no thread, never-finished handshakes end ---

using testing::ProcessThreads;
using testing::ScrapeMetric;
using testing::WaitFor;

std::string ReportBody(uint32_t rank, double p99) {
  proto::ReportMetricsRequest r;
  r.rank = rank;
  proto::OpWindow o;
  o.op = 1;
  o.p99_s = p99;
  r.ops = {o};
  std::string body;
  proto::Writer w(&body);
  r.Encode(w);
  return body;
}

TEST(ConnectionLimitsTest, ConnectionsThatNeverSayHelloDoNotKeepARealClientOut) {
  ManagerProcess m({"--max-connections", "8", "--handshake-timeout-ms", "500"});
  std::vector<std::unique_ptr<RawConn>> silent;
  for (int i = 0; i < 64; ++i) silent.push_back(std::make_unique<RawConn>(m.tcp(), false));
  ASSERT_TRUE(WaitFor([&] { return ScrapeMetric(m, "tierkv_server_connections") == 64; }));
  // Far more silent connections than --max-connections: a real client still gets in.
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  // Each silent one is closed at its handshake deadline.
  for (auto& s : silent) EXPECT_TRUE(s->ClosedWithin(5000));
  EXPECT_EQ(ScrapeMetric(m, "tierkv_server_handshake_timeouts_total"), 64);
  EXPECT_TRUE((*c)->Exist("k").ok());
}

TEST(ConnectionLimitsTest, ARequestOtherThanHelloFirstEndsTheConnection) {
  ManagerProcess m;
  RawConn c(m.tcp(), false);
  c.Send(Opcode::kExist, KeyBody("default", "k"));
  RawReply r;
  ASSERT_TRUE(c.Read(&r));
  EXPECT_EQ(r.header.opcode, static_cast<uint16_t>(Opcode::kFatal));
  EXPECT_EQ(r.code(), Code::kProtocolError);
  EXPECT_NE(r.message().find("HELLO"), std::string::npos);
  EXPECT_TRUE(c.ClosedWithin(2000));
}

TEST(ConnectionLimitsTest, IdleSessionsHoldNoThreadAndDoNotCountAsWorking) {
  ManagerProcess m({"--max-connections", "16"});
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 1000; ++i) idle.push_back(std::make_unique<RawConn>(m.tcp()));
  // Every session said hello; once parked, none holds a worker.
  ASSERT_TRUE(WaitFor([&] {
    return ScrapeMetric(m, "tierkv_server_connections") == 1000 &&
           ScrapeMetric(m, "tierkv_server_connections_working") == 0;
  }));
  // The workers that served the handshakes end once idle: 1000 sessions, and the
  // manager is left with its fixed threads (about 13) and at most the worker
  // serving the scrape's neighbour.
  EXPECT_TRUE(WaitFor([&] { return ScrapeMetric(m, "tierkv_server_worker_threads") == 0; }, 20000));
  EXPECT_LT(ProcessThreads(m.pid()), 24u);
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  // An idle session is still a session: it is served when it speaks again.
  EXPECT_EQ(idle[500]->Call(Opcode::kExist, KeyBody("default", "k")).code(), Code::kOk);
}

TEST(ConnectionLimitsTest, OverTheOpenLimitTheLongestIdleSessionIsShed) {
  ManagerProcess m({"--max-open-connections", "8"});
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(std::make_unique<RawConn>(m.tcp()));
  auto all_parked = [&] {
    return ScrapeMetric(m, "tierkv_server_connections") == 8 &&
           ScrapeMetric(m, "tierkv_server_connections_working") == 0;
  };
  ASSERT_TRUE(WaitFor(all_parked));
  // All but the first speak once more, so the first is the one idle the longest.
  for (int i = 1; i < 8; ++i) {
    EXPECT_EQ(idle[i]->Call(Opcode::kExist, KeyBody("default", "k")).code(), Code::kNotFound);
  }
  ASSERT_TRUE(WaitFor(all_parked));
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(idle[0]->ClosedWithin(2000));  // the one idle the longest
  EXPECT_EQ(ScrapeMetric(m, "tierkv_server_connections_shed_total"), 1);
  EXPECT_EQ(idle[7]->Call(Opcode::kExist, KeyBody("default", "k")).code(), Code::kNotFound);
}

// --- Client-reported metrics are bounded ---

TEST(ClientReportsTest, RanksAreBoundedNonFiniteValuesRefusedAndSeriesGoWithTheirSession) {
  ManagerProcess m({"--max-metric-ranks", "4"});
  {
    RawConn flood(m.tcp());
    for (uint32_t rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(flood.Call(Opcode::kReportMetrics, ReportBody(100 + rank, 0.5)).code(), Code::kOk);
    }
    for (uint32_t rank = 4; rank < 2000; ++rank) {
      ASSERT_EQ(flood.Call(Opcode::kReportMetrics, ReportBody(100 + rank, 0.5)).code(),
                Code::kNoSpace);
    }
    EXPECT_EQ(flood.Call(Opcode::kReportMetrics, ReportBody(100, std::nan(""))).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(ScrapeMetric(m, "tierkv_client_metric_ranks"), 4);
    EXPECT_EQ(ScrapeMetric(m, "tierkv_client_metric_reports_refused_total"), 1996);
    EXPECT_EQ(ScrapeMetric(m, "tierkv_client_metric_reports_invalid_total"), 1);
    EXPECT_EQ(ScrapeMetric(m, "memcache_metric_stale{rank=\"100\"}"), 0);
  }
  // The reporting session is gone: its ranks are dropped at once.
  EXPECT_TRUE(WaitFor([&] { return ScrapeMetric(m, "tierkv_client_metric_ranks") == 0; }));
  EXPECT_EQ(ScrapeMetric(m, "memcache_metric_stale{rank=\"100\"}"), -1);
}

}  // namespace
}  // namespace tierkv
