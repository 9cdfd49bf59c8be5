// The REST API's network side against a real manager: slow, trickling and idle
// HTTP clients cost no worker, so scrapes and health probes keep answering;
// requests that never finish time out with 408; the connection count is
// bounded by shedding the longest idle; Connection: close is honoured on every
// answer; pipelining, 100-continue and chunked bodies behave as documented.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "manager_process.h"
#include "protocol/socket_io.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;
using testing::ScrapeMetric;
using testing::WaitFor;

// A raw HTTP connection to the manager's REST port.
class HttpConn {
 public:
  explicit HttpConn(const ManagerProcess& m) {
    auto addr = proto::ParseAddress(m.rest().substr(std::string("http://").size()));
    auto fd = proto::Connect(*addr);
    EXPECT_TRUE(fd.ok());
    fd_ = fd.ok() ? *fd : -1;
  }
  ~HttpConn() {
    if (fd_ >= 0) close(fd_);
  }
  bool Send(std::string_view bytes) {
    return proto::WriteFull(fd_, bytes.data(), bytes.size(), 5000).ok();
  }
  // Everything the manager sends until it closes or `ms` pass without a byte.
  std::string ReadAll(int ms = 5000) { return ReadUntil("", ms); }
  // Reads until `needle` has arrived (empty: never), the connection ends or
  // `ms` pass without a byte.
  std::string ReadUntil(std::string_view needle, int ms = 5000) {
    std::string out;
    char buf[65536];
    pollfd p{fd_, POLLIN, 0};
    while ((needle.empty() || out.find(needle) == std::string::npos) && poll(&p, 1, ms) > 0) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

size_t Count(const std::string& s, std::string_view what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(HttpGate, ScrapesAndProbesAnswerWhileHundredsOfSlowAndIdleClientsAreOpen) {
  ManagerProcess m({"--metrics-request-timeout-ms", "60000"});
  std::vector<std::unique_ptr<HttpConn>> idle, slow;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<HttpConn>(m));
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<HttpConn>(m));
    ASSERT_TRUE(slow.back()->Send("GET /health HTTP/1.1\r\nHost: x\r\n"));  // and no more
  }
  ASSERT_TRUE(WaitFor([&] { return ScrapeMetric(m, "tierkv_http_connections") >= 400; }));
  httplib::Client http(m.rest());
  http.set_read_timeout(5, 0);
  for (int i = 0; i < 50; ++i) {
    // The trickle goes on: one more header line from every slow client.
    for (auto& s : slow) ASSERT_TRUE(s->Send("X-Trickle: " + std::to_string(i) + "\r\n"));
    auto health = http.Get("/health");
    ASSERT_TRUE(health) << "round " << i;
    EXPECT_EQ(health->status, 200);
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics) << "round " << i;
    EXPECT_NE(metrics->body.find("tierkv_http_connections"), std::string::npos);
  }
  // A slow client that finally finishes its request is answered like anyone.
  ASSERT_TRUE(slow[7]->Send("\r\n"));
  EXPECT_NE(slow[7]->ReadUntil("\"status\":\"ok\"").find("200 OK"), std::string::npos);
}

TEST(HttpGate, ARequestThatNeverCompletesGets408AndIsClosed) {
  ManagerProcess m({"--metrics-request-timeout-ms", "300"});
  HttpConn trickle(m);
  ASSERT_TRUE(trickle.Send("GET /health HTTP/1.1\r\n"));
  const std::string answer = trickle.ReadAll();
  EXPECT_NE(answer.find("HTTP/1.1 408"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"success\":false"), std::string::npos) << answer;
  EXPECT_TRUE(trickle.closed());
  HttpConn silent(m);  // connected, never sent a byte: closed without an answer
  EXPECT_EQ(silent.ReadAll(), "");
  EXPECT_TRUE(silent.closed());
  EXPECT_GE(ScrapeMetric(m, "tierkv_http_request_timeouts_total"), 2);
}

TEST(HttpGate, OverTheConnectionLimitTheLongestIdleIsShed) {
  ManagerProcess m({"--metrics-max-connections", "16"});
  std::vector<std::unique_ptr<HttpConn>> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(std::make_unique<HttpConn>(m));
    ASSERT_TRUE(idle.back()->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_NE(idle.back()->ReadUntil("}").find("200 OK"), std::string::npos);  // kept alive
  }
  httplib::Client http(m.rest());
  auto r = http.Get("/health");  // the 17th connection
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(idle[0]->ReadAll(2000), "");
  EXPECT_TRUE(idle[0]->closed());  // idle the longest
  EXPECT_GE(ScrapeMetric(m, "tierkv_http_connections_shed_total"), 1);
  ASSERT_TRUE(idle[15]->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(idle[15]->ReadUntil("}").find("200 OK"), std::string::npos);
}

TEST(HttpGate, ConnectionCloseIsHonouredOnErrorAnswersToo) {
  ManagerProcess m;
  for (const char* path : {"/no/such/path", "/query_key?key=missing", "/health"}) {
    HttpConn c(m);
    ASSERT_TRUE(
        c.Send(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string answer = c.ReadAll();
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << path << answer;
    EXPECT_TRUE(c.closed()) << path;
  }
  HttpConn old(m);  // HTTP/1.0 without keep-alive closes too
  ASSERT_TRUE(old.Send("GET /health HTTP/1.0\r\n\r\n"));
  EXPECT_NE(old.ReadAll().find("200"), std::string::npos);
  EXPECT_TRUE(old.closed());
}

TEST(HttpGate, PipelinedRequestsAreAnsweredInOrder) {
  ManagerProcess m;
  HttpConn c(m);
  ASSERT_TRUE(
      c.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /no/such HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answer = c.ReadAll();
  EXPECT_EQ(Count(answer, "HTTP/1.1 200"), 2u) << answer;
  EXPECT_EQ(Count(answer, "HTTP/1.1 404"), 1u) << answer;
  EXPECT_LT(answer.find("HTTP/1.1 404"), answer.rfind("HTTP/1.1 200"));
  EXPECT_TRUE(c.closed());
}

TEST(HttpGate, ExpectContinueAndChunkedBodies) {
  ManagerProcess m;
  HttpConn c(m);
  const std::string body = "value";
  ASSERT_TRUE(
      c.Send("PUT /metadata?key=k HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
             "Content-Length: " +
             std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_NE(c.ReadUntil("\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  ASSERT_TRUE(c.Send(body));
  const std::string put = c.ReadUntil("metadata updated");
  EXPECT_NE(put.find("HTTP/1.1 200"), std::string::npos) << put;
  EXPECT_EQ(put.find("100 Continue"), std::string::npos) << put;  // only once
  HttpConn chunked(m);
  ASSERT_TRUE(
      chunked.Send("PUT /metadata?key=k HTTP/1.1\r\nHost: x\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n5\r\nvalue\r\n0\r\n\r\n"));
  const std::string answer = chunked.ReadAll();
  EXPECT_NE(answer.find("HTTP/1.1 411"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Content-Length"), std::string::npos);
  EXPECT_TRUE(chunked.closed());
}

}  // namespace
}  // namespace tierkv
