// PeerGate in front of a loopback echo server: bytes relayed both ways
// unchanged (also when a side is slow to read), the connection limit with
// shedding, the handshake and idle timeouts, and the count going back to zero.
#include "cluster/peer_gate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "wait_for.h"

namespace tierkv {
namespace {

using testing::WaitFor;

int ListenLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(listen(fd, 256), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int Dial(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Whether the peer closed `fd` (a read returns 0 or fails) within `ms`.
bool ClosedWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

bool SendAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string RecvExactly(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

// Echoes every byte back on each connection, a thread per connection.
class EchoServer {
 public:
  EchoServer() : fd_(ListenLoopback(&port_)) {
    acceptor_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        accepted_.fetch_add(1);
        workers_.emplace_back([c] {
          char buf[65536];
          for (;;) {
            const ssize_t n = recv(c, buf, sizeof buf, 0);
            if (n <= 0 || !SendAll(c, std::string(buf, static_cast<size_t>(n)))) break;
          }
          close(c);
        });
      }
    });
  }
  ~EchoServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    acceptor_.join();
    for (std::thread& t : workers_) t.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int port_ = 0;
  int fd_;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

PeerGateOptions Options(const EchoServer& echo) {
  PeerGateOptions o;
  o.listen = "127.0.0.1:0";
  o.backend = "127.0.0.1:" + std::to_string(echo.port());
  return o;
}

TEST(PeerGate, RelaysBytesBothWaysUnchangedEvenToASlowReader) {
  EchoServer echo;
  PeerGate gate(Options(echo));
  ASSERT_TRUE(gate.Start().ok());
  const int fd = Dial(gate.port());
  std::string big(8 << 20, '\0');  // more than any socket buffer holds
  std::mt19937_64 gen(7);
  for (char& c : big) c = static_cast<char>(gen());
  std::thread writer([&] { EXPECT_TRUE(SendAll(fd, big)); });
  EXPECT_TRUE(RecvExactly(fd, big.size()) == big);
  writer.join();
  EXPECT_EQ(gate.Stats().connections, 1u);
  close(fd);
  EXPECT_TRUE(WaitFor([&] { return gate.Stats().connections == 0; }));
  EXPECT_EQ(gate.Stats().accepted, 1u);
}

TEST(PeerGate, OverTheLimitTheSilentOnesAreShedAndANewPeerIsServed) {
  EchoServer echo;
  PeerGateOptions o = Options(echo);
  o.max_connections = 8;
  PeerGate gate(o);
  ASSERT_TRUE(gate.Start().ok());
  const int talker = Dial(gate.port());
  ASSERT_TRUE(SendAll(talker, "hello"));
  ASSERT_EQ(RecvExactly(talker, 5), "hello");
  std::vector<int> silent;
  for (int i = 0; i < 40; ++i) silent.push_back(Dial(gate.port()));
  ASSERT_TRUE(WaitFor([&] { return gate.Stats().accepted == 41; }));
  EXPECT_LE(gate.Stats().connections, 8u);
  EXPECT_EQ(gate.Stats().shed, 33u);
  EXPECT_EQ(echo.accepted(), 1);  // silent connections never reached the server
  // The one that talked is shed last: it still works.
  ASSERT_TRUE(SendAll(talker, "again"));
  EXPECT_EQ(RecvExactly(talker, 5), "again");
  // So does a new one.
  const int fresh = Dial(gate.port());
  ASSERT_TRUE(SendAll(fresh, "new"));
  EXPECT_EQ(RecvExactly(fresh, 3), "new");
  for (int fd : silent) close(fd);
  close(talker);
  close(fresh);
  EXPECT_TRUE(WaitFor([&] { return gate.Stats().connections == 0; }));
}

TEST(PeerGate, ASilentConnectionMissesItsHandshakeAndAnIdleOneIsClosed) {
  EchoServer echo;
  PeerGateOptions o = Options(echo);
  o.handshake_timeout_ms = 200;
  o.idle_timeout_ms = 400;
  PeerGate gate(o);
  ASSERT_TRUE(gate.Start().ok());
  const int silent = Dial(gate.port());
  const int talker = Dial(gate.port());
  ASSERT_TRUE(SendAll(talker, "x"));
  ASSERT_EQ(RecvExactly(talker, 1), "x");
  EXPECT_TRUE(ClosedWithin(silent, 5000));
  EXPECT_EQ(gate.Stats().handshake_timeouts, 1u);
  EXPECT_TRUE(ClosedWithin(talker, 5000));
  EXPECT_EQ(gate.Stats().idle_closed, 1u);
  EXPECT_TRUE(WaitFor([&] { return gate.Stats().connections == 0; }));
  close(silent);
  close(talker);
}

TEST(PeerGate, AnUnreachableBackendClosesTheConnectionAndCountsIt) {
  int port = 0;
  const int fd = ListenLoopback(&port);
  close(fd);  // nobody listens there now
  PeerGateOptions o;
  o.listen = "127.0.0.1:0";
  o.backend = "127.0.0.1:" + std::to_string(port);
  PeerGate gate(o);
  ASSERT_TRUE(gate.Start().ok());
  const int c = Dial(gate.port());
  ASSERT_TRUE(SendAll(c, "x"));  // the backend is dialled at the first byte
  EXPECT_TRUE(ClosedWithin(c, 5000));
  EXPECT_EQ(gate.Stats().backend_failures, 1u);
  close(c);
}

TEST(PeerGate, AnAddressInUseIsRefusedNamingIt) {
  EchoServer echo;
  PeerGateOptions o = Options(echo);
  o.listen = "127.0.0.1:" + std::to_string(echo.port());
  PeerGate gate(o);
  const Status st = gate.Start();
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("cannot listen on --addr"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tierkv
