#include "cluster/peer_gate.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <list>
#include <thread>

#include "transfer/asio_util.h"

namespace tierkv {

using asio::ip::tcp;
using transfer::kAwaitTuple;

namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The bytes one read moves at most (one buffer for the whole gate).
constexpr size_t kRelayBytes = 256 << 10;

}  // namespace

// One relayed connection: the peer's socket and the one to the gRPC server.
// Lives on the gate's thread only.
struct PeerConn {
  PeerConn(tcp::socket peer, asio::io_context& io)
      : client(std::move(peer)), backend(io), timer(io) {}
  void Close() {
    if (closed) return;
    closed = true;
    asio::error_code ignored;
    client.close(ignored);
    backend.close(ignored);
    timer.cancel();
  }
  tcp::socket client;
  tcp::socket backend;
  asio::steady_timer timer;  // the handshake / idle deadline
  int64_t accepted_ns = 0;
  int64_t last_ns = 0;      // when a byte last moved, either way
  bool first_byte = false;  // the peer has sent something
  bool closed = false;
  bool listed = false;
  std::list<std::shared_ptr<PeerConn>>::iterator pos;
};

struct PeerGate::Impl {
  explicit Impl(PeerGateOptions o) : options(std::move(o)) {}

  asio::awaitable<void> Accept();
  asio::awaitable<void> Serve(std::shared_ptr<PeerConn> c);
  // Moves bytes from one side to the other until either ends.
  asio::awaitable<void> Pump(std::shared_ptr<PeerConn> c, bool from_peer);
  // Closes the connection at its handshake or idle deadline.
  asio::awaitable<void> Watch(std::shared_ptr<PeerConn> c);
  // Closes the connection silent the longest since its accept, else the one
  // idle the longest. Needs at least one open.
  void ShedOne();
  void Leave(const std::shared_ptr<PeerConn>& c);

  const PeerGateOptions options;
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
  tcp::endpoint backend;
  std::list<std::shared_ptr<PeerConn>> conns;  // open connections, oldest first
  std::array<char, kRelayBytes> buffer;
  std::thread thread;
  std::atomic<int> port{0};
  std::atomic<uint64_t> connections{0}, accepted{0}, shed{0}, handshake_timeouts{0}, idle_closed{0},
      backend_failures{0};
};

asio::awaitable<void> PeerGate::Impl::Accept() {
  for (;;) {
    auto [ec, sock] = co_await acceptor->async_accept(kAwaitTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) co_return;
      continue;  // a failed accept (EMFILE, a reset peer) ends nothing else
    }
    if (conns.size() >= options.max_connections) ShedOne();
    auto c = std::make_shared<PeerConn>(std::move(sock), io);
    c->accepted_ns = c->last_ns = SteadyNanos();
    c->pos = conns.insert(conns.end(), c);
    c->listed = true;
    connections.store(conns.size(), std::memory_order_relaxed);
    accepted.fetch_add(1, std::memory_order_relaxed);
    asio::co_spawn(io, Serve(std::move(c)), asio::detached);
  }
}

void PeerGate::Impl::ShedOne() {
  std::shared_ptr<PeerConn> victim;
  for (const std::shared_ptr<PeerConn>& c : conns) {
    // Silent since the accept first (the oldest of those), then idle longest.
    const auto key = [](const PeerConn& p) {
      return std::make_pair(p.first_byte, p.first_byte ? p.last_ns : p.accepted_ns);
    };
    if (!victim || key(*c) < key(*victim)) victim = c;
  }
  if (!victim) return;
  shed.fetch_add(1, std::memory_order_relaxed);
  victim->Close();
  Leave(victim);
}

void PeerGate::Impl::Leave(const std::shared_ptr<PeerConn>& c) {
  if (!c->listed) return;
  c->listed = false;
  conns.erase(c->pos);
  connections.store(conns.size(), std::memory_order_relaxed);
}

asio::awaitable<void> PeerGate::Impl::Serve(std::shared_ptr<PeerConn> c) {
  asio::co_spawn(io, Watch(c), asio::detached);
  // The gRPC server sees a connection only once its peer has said something:
  // a silent one costs it nothing.
  auto [wait_ec] = co_await c->client.async_wait(tcp::socket::wait_read, kAwaitTuple);
  if (wait_ec || c->closed) {
    c->Close();
    Leave(c);
    co_return;
  }
  auto [ec] = co_await c->backend.async_connect(backend, kAwaitTuple);
  if (ec || c->closed) {
    if (!c->closed) backend_failures.fetch_add(1, std::memory_order_relaxed);
    c->Close();
    Leave(c);
    co_return;
  }
  asio::error_code ignored;
  c->client.set_option(tcp::no_delay(true), ignored);
  c->backend.set_option(tcp::no_delay(true), ignored);
  c->client.non_blocking(true, ignored);
  c->backend.non_blocking(true, ignored);
  asio::co_spawn(io, Pump(c, true), asio::detached);
  asio::co_spawn(io, Pump(c, false), asio::detached);
}

asio::awaitable<void> PeerGate::Impl::Pump(std::shared_ptr<PeerConn> c, bool from_peer) {
  tcp::socket& from = from_peer ? c->client : c->backend;
  tcp::socket& to = from_peer ? c->backend : c->client;
  while (!c->closed) {
    // Waits for bytes without holding a buffer: an idle connection costs none.
    auto [ec] = co_await from.async_wait(tcp::socket::wait_read, kAwaitTuple);
    if (ec || c->closed) break;
    asio::error_code rec;
    const size_t n = from.read_some(asio::buffer(buffer), rec);
    if (rec == asio::error::would_block || rec == asio::error::try_again) continue;
    if (rec || n == 0) break;
    c->last_ns = SteadyNanos();
    if (from_peer) c->first_byte = true;
    asio::error_code wec;
    size_t written = to.write_some(asio::buffer(buffer.data(), n), wec);
    if (wec == asio::error::would_block || wec == asio::error::try_again) {
      written = 0;
    } else if (wec) {
      break;
    }
    if (written < n) {
      // The other side is slow: this connection keeps the rest until it is
      // written, and reads nothing more meanwhile.
      std::string rest(buffer.data() + written, n - written);
      auto [wait_ec, sent] = co_await asio::async_write(to, asio::buffer(rest), kAwaitTuple);
      if (wait_ec) break;
      c->last_ns = SteadyNanos();
    }
  }
  c->Close();
  Leave(c);
}

asio::awaitable<void> PeerGate::Impl::Watch(std::shared_ptr<PeerConn> c) {
  while (!c->closed) {
    const int64_t deadline = c->first_byte
                                 ? c->last_ns + options.idle_timeout_ms * 1'000'000
                                 : c->accepted_ns + options.handshake_timeout_ms * 1'000'000;
    const int64_t now = SteadyNanos();
    if (now >= deadline) {
      (c->first_byte ? idle_closed : handshake_timeouts).fetch_add(1, std::memory_order_relaxed);
      c->Close();
      Leave(c);
      co_return;
    }
    c->timer.expires_after(std::chrono::nanoseconds(deadline - now));
    co_await c->timer.async_wait(kAwaitTuple);
  }
}

PeerGate::PeerGate(PeerGateOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

PeerGate::~PeerGate() { Stop(); }

Status PeerGate::Start() {
  Impl& g = *impl_;
  Result<tcp::endpoint> listen = transfer::ResolveEndpoint(g.io, g.options.listen);
  if (!listen.ok()) return listen.status();
  Result<tcp::endpoint> backend = transfer::ResolveEndpoint(g.io, g.options.backend);
  if (!backend.ok()) return backend.status();
  g.backend = *backend;
  auto acceptor = std::make_unique<tcp::acceptor>(g.io);
  asio::error_code ec;
  acceptor->open(listen->protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->bind(*listen, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(Code::kUnavailable,
                  "cannot listen on --addr " + g.options.listen + " (peer gRPC): " + ec.message());
  }
  g.port.store(acceptor->local_endpoint().port());
  g.acceptor = std::move(acceptor);
  asio::co_spawn(g.io, g.Accept(), asio::detached);
  g.thread = std::thread([&g] { g.io.run(); });
  return Status::Ok();
}

void PeerGate::Stop() {
  Impl& g = *impl_;
  if (!g.thread.joinable()) return;
  asio::post(g.io, [&g] {
    asio::error_code ignored;
    g.acceptor->close(ignored);
    while (!g.conns.empty()) {
      std::shared_ptr<PeerConn> c = g.conns.front();
      c->Close();
      g.Leave(c);
    }
    g.io.stop();
  });
  g.thread.join();
}

int PeerGate::port() const { return impl_->port.load(); }

PeerGateStats PeerGate::Stats() const {
  const Impl& g = *impl_;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {get(g.connections),        get(g.accepted),    get(g.shed),
          get(g.handshake_timeouts), get(g.idle_closed), get(g.backend_failures)};
}

}  // namespace tierkv
