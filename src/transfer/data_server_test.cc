// The data channel's listener under pressure: when it is full, a new
// connection sheds one that waits for a request (never-used ones first, then
// the one idle the longest), never one that is answering; an AUTHORIZE that
// arrives in many pieces is decided on all of its bytes.
#include "transfer/data_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transfer/data_frame.h"
#include "transfer/tcp_transport.h"
#include "wait_for.h"

namespace tierkv::transfer {
namespace {

constexpr uint64_t kTicket = 7;
constexpr uint64_t kGeneration = 3;

// One item (ticket kTicket, item 0, generation kGeneration) of 4096 bytes;
// AUTHORIZEs are decided off the event loop, and wait while `hold` is set.
class StubSource : public GrantSource {
 public:
  StubSource() : bytes_(4096, 's') {}

  Result<GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) override {
    if (ticket != kTicket || item != 0) return Status(Code::kNotFound, "no such grant");
    if (generation != kGeneration) return InvalidArgument("another generation");
    GrantSpan span;
    span.data = bytes_.data();
    span.size = bytes_.size();
    return span;
  }

  Result<std::string> Authorize(uint64_t ticket, std::string_view request) override {
    std::unique_lock lock(mu_);
    deciding_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_; });
    deciding_ = false;
    seen_ = std::string(request);
    return "granted " + std::to_string(ticket);
  }

  void Hold(bool on) {
    std::lock_guard lock(mu_);
    hold_ = on;
    cv_.notify_all();
  }
  // Waits until an AUTHORIZE is being decided (held).
  bool AwaitDeciding() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return deciding_; });
  }
  std::string seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  const std::vector<uint8_t> bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  bool deciding_ = false;
  std::string seen_;
};

class DataServerTest : public ::testing::Test {
 protected:
  void Start(size_t max_connections) {
    DataServerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = 1;  // connections enter the shedding order in the order they came
    o.max_connections = max_connections;
    server_ = std::make_unique<DataServer>(o, &source_);
    ASSERT_TRUE(server_->Start().ok());
    ep_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  std::unique_ptr<TcpTransport> Reader() {
    auto made = TcpTransport::Create({});
    EXPECT_TRUE(made.ok());
    return made.ok() ? std::move(*made) : nullptr;
  }
  // A READ of the whole item; its bytes checked.
  ::testing::AssertionResult ReadOnce(TcpTransport& reader) {
    std::vector<uint8_t> dest(4096);
    const Status st = reader.Read(ep_, {kTicket, 0, kGeneration, 0, dest.size()}, dest.data());
    if (!st.ok()) return ::testing::AssertionFailure() << st.ToString();
    if (!std::all_of(dest.begin(), dest.end(), [](uint8_t b) { return b == 's'; })) {
      return ::testing::AssertionFailure() << "wrong bytes";
    }
    return ::testing::AssertionSuccess();
  }
  // A connection that never sends anything; returned once the server has
  // taken it (accepted or refused).
  std::unique_ptr<asio::ip::tcp::socket> Silent() {
    auto taken = [&] {
      const DataServerStats s = server_->Stats();
      return s.connections_total + s.refused;
    };
    const uint64_t before = taken();
    auto s = std::make_unique<asio::ip::tcp::socket>(io_);
    s->connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server_->port())});
    EXPECT_TRUE(testing::WaitFor([&] { return taken() > before; }));
    return s;
  }
  // Whether the server has closed `s` (its next read ends at once).
  static bool ClosedByServer(asio::ip::tcp::socket& s) {
    uint8_t byte = 0;
    asio::error_code ec;
    s.non_blocking(false);
    s.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
  static bool StillOpen(asio::ip::tcp::socket& s) {
    uint8_t byte = 0;
    asio::error_code ec;
    s.non_blocking(true);
    s.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::would_block;
  }

  StubSource source_;
  asio::io_context io_;
  std::unique_ptr<DataServer> server_;
  std::string ep_;
};

TEST_F(DataServerTest, AFullServerShedsNeverUsedConnectionsFirstThenTheOneIdleTheLongest) {
  Start(3);
  auto a = Reader();
  ASSERT_TRUE(ReadOnce(*a));
  auto silent1 = Silent();
  auto silent2 = Silent();
  ASSERT_EQ(server_->Stats().connections, 3u);

  // Full: b's connection sheds the older of the two that never sent a request.
  auto b = Reader();
  ASSERT_TRUE(ReadOnce(*b));
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Stats().shed == 1; }));
  EXPECT_TRUE(ClosedByServer(*silent1));
  EXPECT_TRUE(StillOpen(*silent2));
  // a's connection is still there: a reads again on it.
  const uint64_t accepted = server_->Stats().connections_total;
  ASSERT_TRUE(ReadOnce(*a));
  EXPECT_EQ(server_->Stats().connections_total, accepted);

  // A never-used connection goes before an idle one, however long that has
  // been idle (b, since its read).
  auto silent3 = Silent();
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Stats().shed == 2; }));
  EXPECT_TRUE(ClosedByServer(*silent2));
  silent3->close();
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Stats().connections == 2; }));

  // Only used connections, now: a new one sheds the one idle the longest.
  auto c = Reader();
  ASSERT_TRUE(ReadOnce(*c));  // a, b and c open
  ASSERT_TRUE(ReadOnce(*a));
  ASSERT_TRUE(ReadOnce(*c));  // b is idle the longest
  auto d = Reader();
  ASSERT_TRUE(ReadOnce(*d));
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Stats().shed == 3; }));
  const uint64_t before_b = server_->Stats().connections_total;
  ASSERT_TRUE(ReadOnce(*a));  // still on its own connection
  ASSERT_TRUE(ReadOnce(*c));
  EXPECT_EQ(server_->Stats().connections_total, before_b);
  // b finds its connection closed, opens a new one (which sheds d, now idle
  // the longest) and reads.
  ASSERT_TRUE(ReadOnce(*b));
  EXPECT_EQ(server_->Stats().connections_total, before_b + 1);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Stats().shed == 4; }));
  EXPECT_EQ(server_->Stats().refused, 0u);
  server_->Stop();
}

// Every connection is answering (an AUTHORIZE being decided): a new one is
// closed at accept, and the one being answered is untouched. The request
// came in many pieces and was decided on all of its bytes.
TEST_F(DataServerTest, AFullServerWhoseConnectionsAllAnswerRefusesANewOne) {
  Start(1);
  source_.Hold(true);
  std::string request(200 * 1024 + 3, '\0');
  for (size_t i = 0; i < request.size(); ++i) request[i] = static_cast<char>(i * 131 + i / 7);
  auto a = Reader();
  Result<std::string> answer = Status(Code::kInternal, "not yet");
  std::thread asking([&] { answer = a->Authorize(ep_, 9, request, 10000); });
  ASSERT_TRUE(source_.AwaitDeciding());
  auto other = Silent();
  EXPECT_TRUE(ClosedByServer(*other));
  EXPECT_EQ(server_->Stats().refused, 1u);
  EXPECT_EQ(server_->Stats().shed, 0u);
  source_.Hold(false);
  asking.join();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(*answer, "granted 9");
  EXPECT_TRUE(source_.seen() == request);
  // Idle again: the next connection sheds it, and a's next READ reconnects.
  auto b = Reader();
  ASSERT_TRUE(ReadOnce(*b));
  EXPECT_EQ(server_->Stats().shed, 1u);
  ASSERT_TRUE(ReadOnce(*a));
  server_->Stop();
}

}  // namespace
}  // namespace tierkv::transfer
