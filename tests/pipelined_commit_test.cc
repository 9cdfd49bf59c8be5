// ClientOptions::pipeline_commits against a real manager: puts that do not
// wait for their commit's answer, and how a failed commit is reported.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>
#include <string>

#include "client_util.h"
#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;

std::string Pattern(size_t n, uint32_t seed) { return testing::RandomBytes(n, seed); }

std::unique_ptr<Client> ConnectPipelined(const std::string& address) {
  ClientOptions o;
  o.pipeline_commits = true;
  return testing::ConnectWith(address, o);
}

TEST(PipelinedCommit, EveryPutIsStoredAndReadableByItsOwnClientAtOnce) {
  ManagerProcess m({"--dram-size", "512MiB"});  // room for all: nothing is evicted
  auto writer = ConnectPipelined(m.uds());
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->shared_memory());
  const size_t sizes[] = {1, 100, 4096, 65536, 1 << 20, 3 << 20};
  for (int i = 0; i < 120; ++i) {
    const std::string key = "p" + std::to_string(i);
    ASSERT_TRUE(writer->Put(key, Pattern(sizes[i % 6], i)).ok()) << i;
    if (i % 10 == 0) {
      // The same session's next call runs after the commit: it sees the value.
      auto v = writer->Get(key);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      EXPECT_EQ(*v, Pattern(sizes[i % 6], i));
    }
  }
  // An alloc failure is still answered by the put itself.
  EXPECT_EQ(writer->Put("p1", "again").code(), Code::kDuplicated);
  ASSERT_TRUE(writer->Upsert("p2", "replaced").ok());
  ASSERT_TRUE(writer->Flush().ok());
  auto reader = Client::Connect(m.uds());
  ASSERT_TRUE(reader.ok());
  for (int i = 0; i < 120; ++i) {
    auto v = (*reader)->Get("p" + std::to_string(i));
    ASSERT_TRUE(v.ok()) << i << ": " << v.status().ToString();
    EXPECT_EQ(*v, i == 2 ? std::string("replaced") : Pattern(sizes[i % 6], i)) << i;
  }
  EXPECT_TRUE(writer->Flush().ok());  // nothing unanswered: OK again
}

// The manager refuses every third commit (--inject-commit-failures 3) as if
// its write grant had expired.
::testing::AssertionResult RefusedCommitOf(const Status& st, const std::string& key) {
  if (st.code() != Code::kLeaseExpired) {
    return ::testing::AssertionFailure() << "not a refused commit: " << st.ToString();
  }
  if (st.message().find("the commit of '" + key + "'") == std::string::npos) {
    return ::testing::AssertionFailure() << "does not name " << key << ": " << st.ToString();
  }
  return ::testing::AssertionSuccess();
}

class FailingCommitTest : public ::testing::Test {
 protected:
  FailingCommitTest() : m_({"--inject-commit-failures", "3"}) {}
  ManagerProcess m_;
};

TEST_F(FailingCommitTest, WithoutPipeliningThePutItselfFails) {
  auto c = Client::Connect(m_.uds());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Put("a", "1").ok());
  ASSERT_TRUE((*c)->Put("b", "2").ok());
  EXPECT_EQ((*c)->Put("third", "3").code(), Code::kLeaseExpired);
}

TEST_F(FailingCommitTest, TheNextPutReturnsTheFailureAndStoresNothing) {
  auto c = ConnectPipelined(m_.uds());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("a", "1").ok());
  ASSERT_TRUE(c->Put("b", "2").ok());
  ASSERT_TRUE(c->Put("third", "3").ok());  // sent; its commit will be refused
  EXPECT_TRUE(RefusedCommitOf(c->Put("small", "v"), "third"));
  // Neither put stored anything, and "small" was not left in flight: putting
  // it again works (an in-flight put of the key would answer DUPLICATED).
  auto other = Client::Connect(m_.uds());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->Exist("third").code(), Code::kNotFound);
  EXPECT_EQ((*other)->Exist("small").code(), Code::kNotFound);
  EXPECT_TRUE((*other)->Exist("b").ok());
  ASSERT_TRUE(c->Put("small", "v").ok());
  ASSERT_TRUE(c->Flush().ok());
  EXPECT_EQ(*(*other)->Get("small"), "v");
}

TEST_F(FailingCommitTest, AnyOtherNextCallReturnsTheFailureInsteadOfRunning) {
  auto c = ConnectPipelined(m_.uds());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("small", "v").ok());
  ASSERT_TRUE(c->Put("x", "1").ok());
  ASSERT_TRUE(c->Put("third", "3").ok());
  // The remove is not performed: the earlier failure comes back instead.
  EXPECT_TRUE(RefusedCommitOf(c->Remove("small"), "third"));
  EXPECT_TRUE(c->Exist("small").ok());
  // Flush reports a failure once.
  ASSERT_TRUE(c->Put("y", "4").ok());
  ASSERT_TRUE(c->Put("z", "5").ok());
  ASSERT_TRUE(c->Put("sixth", "6").ok());
  EXPECT_TRUE(RefusedCommitOf(c->Flush(), "sixth"));
  EXPECT_TRUE(c->Flush().ok());
  EXPECT_EQ(*c->Get("small"), "v");
  EXPECT_EQ(c->Exist("sixth").code(), Code::kNotFound);
}

TEST(PipelinedCommit, ALostConnectionIsReportedByTheNextCall) {
  auto m = std::make_unique<ManagerProcess>();
  auto c = ConnectPipelined(m->uds());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("k", "v").ok());
  EXPECT_EQ(m->Stop(SIGKILL), 128 + SIGKILL);
  // Whether or not the commit was answered before the manager died, the next
  // call cannot run and says so.
  EXPECT_EQ(c->Exist("k").code(), Code::kUnavailable);
}

TEST(PipelinedCommit, OverTcpEveryPutWaitsForItsAnswer) {
  ManagerProcess m;
  auto c = ConnectPipelined(m.tcp());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("k", "v").ok());
  auto other = Client::Connect(m.tcp());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*(*other)->Get("k"), "v");  // no Flush needed
  EXPECT_EQ(c->Put("k", "w").code(), Code::kDuplicated);
}

}  // namespace
}  // namespace tierkv
