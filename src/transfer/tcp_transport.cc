#include "transfer/tcp_transport.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <optional>

#include "media/checksum.h"
#include "protocol/socket_io.h"
#include "transfer/asio_util.h"

namespace tierkv::transfer {

using asio::ip::tcp;

struct TcpTransport::Conn {
  asio::io_context io;
  tcp::socket sock{io};
  std::unique_ptr<asio::ssl::stream<tcp::socket>> tls;  // with TLS: owns the socket
  // How long this connection's waits for the owner's bytes take (the answer
  // to a request, the next piece of a value): the window polled before sleeping.
  proto::WaitAverage waits;
  tcp::socket& lowest() { return tls ? tls->next_layer() : sock; }
};

namespace {

// A connection's first wait, before it has learnt any, is polled this long
// (capped), as a client's first reply of a kind is.
constexpr int kFirstPollUs = 50;
// At most this many calls of one transport poll at once; the others sleep at
// once. Each poller holds a core; the owner's sending threads need cores too.
constexpr int kMaxPollers = 1;

Status Lost(const std::string& endpoint, const std::string& what) {
  return Status(Code::kUnavailable, "data channel to " + endpoint + ": " + what);
}

// How a call waits for the owner: `waits` (null: never polls) learns how long
// its waits take, and each is busy-polled for up to its window, at most
// `cap_us`, before the thread sleeps (proto::WaitAverage, as the client waits
// for a manager's reply): an answer that comes while the caller polls costs
// no wake-up of a sleeping thread. `counts` is the transport's.
struct Waiting {
  proto::WaitAverage* waits = nullptr;
  int cap_us = 0;
  TcpTransport::WaitCounters* counts = nullptr;
};

// Polls `fd` for up to `window` µs unless kMaxPollers calls of the transport
// poll already; true when it became readable.
bool PollOwner(int fd, int window, TcpTransport::WaitCounters& counts) {
  if (window <= 0) return false;
  if (counts.pollers.fetch_add(1, std::memory_order_relaxed) >= kMaxPollers) {
    counts.pollers.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  counts.polled.fetch_add(1, std::memory_order_relaxed);
  const bool ready = proto::SpinReadable(fd, window);
  counts.pollers.fetch_sub(1, std::memory_order_relaxed);
  if (ready) counts.caught.fetch_add(1, std::memory_order_relaxed);
  return ready;
}

// Runs `op` (a coroutine on conn.io) to its end or until `budget` passes, in
// which case the socket is closed and the call fails.
template <class Op>
Status RunBounded(asio::io_context& io, tcp::socket& sock, std::chrono::milliseconds budget, Op op,
                  const std::string& endpoint, Waiting waiting = {}) {
  using Clock = std::chrono::steady_clock;
  std::optional<Status> result;
  io.restart();
  asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, Status st) {
    result = e ? Lost(endpoint, "internal error") : std::move(st);
  });
  const Clock::time_point deadline = Clock::now() + budget;
  bool caught = false;  // the last poll found the socket readable
  for (;;) {
    const size_t ran = io.poll();  // every step that can go on without waiting
    if (result || io.stopped()) break;
    // Waiting for the owner: poll its socket first, then sleep. Bytes that
    // came while the call waits for something else (its own write to drain)
    // are not polled for again: it sleeps until something can run.
    if (waiting.waits == nullptr || (caught && ran == 0)) {
      caught = false;
      if (io.run_one_until(deadline) == 0) break;  // the budget is spent
      continue;
    }
    const Clock::time_point t0 = Clock::now();
    const int window = waiting.waits->PollUs(waiting.cap_us, kFirstPollUs);
    caught = PollOwner(sock.native_handle(), window, *waiting.counts);
    if (!caught) {
      waiting.counts->slept.fetch_add(1, std::memory_order_relaxed);
      if (io.run_one_until(deadline) == 0) break;  // the budget is spent
    }
    waiting.waits->Record(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
  }
  if (!result) {
    asio::error_code ignored;
    sock.close(ignored);
    io.restart();
    io.run();  // the aborted operations finish
    return Lost(endpoint, "timed out");
  }
  return *result;
}

// Runs `make(stream)` on `c`'s TLS stream when it has one, else on its socket,
// bounded by `budget` as RunBounded.
template <class Conn, class MakeOp>
Status RunOn(Conn& c, std::chrono::milliseconds budget, int spin_cap_us,
             TcpTransport::WaitCounters& counts, MakeOp make, const std::string& endpoint) {
  const Waiting waiting{&c.waits, spin_cap_us, &counts};
  return c.tls ? RunBounded(c.io, c.lowest(), budget, make(*c.tls), endpoint, waiting)
               : RunBounded(c.io, c.sock, budget, make(c.sock), endpoint, waiting);
}

// Reads and decodes a response head.
template <class Stream>
asio::awaitable<Status> ReadHead(Stream& sock, const std::string& endpoint, ResponseHead* head) {
  std::array<uint8_t, kResponseBytes> in{};
  auto [hec, hn] = co_await asio::async_read(sock, asio::buffer(in), kWholeRest, kAwaitTuple);
  if (hec) co_return Lost(endpoint, hec.message());
  co_return DecodeResponse(in.data(), head);
}

// Writes a request (`bufs`).
template <class Stream, class Buffers>
asio::awaitable<Status> Send(Stream& sock, const Buffers& bufs, const std::string& endpoint) {
  auto [wec, wn] = co_await asio::async_write(sock, bufs, kWholeRest, kAwaitTuple);
  if (wec) co_return Lost(endpoint, wec.message());
  co_return Status::Ok();
}

// The answer to a READ already sent. *in_step: the connection may carry
// another request (an answer, or a refusal read to its end).
// The next bytes of `dest` to read at once: up to kHashPiece of them from
// piece *at (byte *offset on), across pieces; the cursor moves past them.
void NextBatch(std::span<const MemoryPiece> dest, size_t* at, uint64_t* offset,
               std::vector<asio::mutable_buffer>* batch) {
  batch->clear();
  uint64_t got = 0;
  while (got < kHashPiece && *at < dest.size()) {
    const MemoryPiece& p = dest[*at];
    const uint64_t n = std::min<uint64_t>(p.size - *offset, kHashPiece - got);
    if (n > 0) batch->push_back(asio::buffer(p.data + *offset, n));
    got += n;
    *offset += n;
    if (*offset == p.size) {
      ++*at;
      *offset = 0;
    }
  }
}

template <class Stream>
asio::awaitable<Status> ReadAnswer(Stream& sock, const ReadRequest& req,
                                   std::span<const MemoryPiece> dest, const std::string& endpoint,
                                   bool* in_step, uint64_t* checksum) {
  ResponseHead head;
  if (Status st = co_await ReadHead(sock, endpoint, &head); !st.ok()) co_return st;
  if (head.code != 0) {
    std::string text(head.length, '\0');
    auto [tec, tn] = co_await asio::async_read(sock, asio::buffer(text), kWholeRest, kAwaitTuple);
    if (tec) co_return Lost(endpoint, tec.message());
    *in_step = true;
    co_return Status(static_cast<Code>(head.code), "owner refused the read: " + text);
  }
  if (head.length != req.length) {
    co_return Status(Code::kProtocolError, "data channel: " + std::to_string(head.length) +
                                               " bytes announced, " + std::to_string(req.length) +
                                               " asked");
  }
  if (TotalSize(dest) != req.length) {
    co_return Status(Code::kInternal, "data channel: a READ of " + std::to_string(req.length) +
                                          " bytes into " + std::to_string(TotalSize(dest)));
  }
  std::array<uint8_t, kTrailerBytes> trailer{};
  uint64_t sum = 0;
  // The bytes come in batches of at most kHashPiece, each hashed while it is
  // still in cache and the owner sends the next; the last batch and the
  // trailer in one read.
  std::vector<asio::mutable_buffer> batch;
  size_t at = 0;
  uint64_t offset = 0;
  NextBatch(dest, &at, &offset, &batch);
  if (at == dest.size() && batch.size() <= 1) {  // one batch of one piece: hashed in one go
    batch.push_back(asio::buffer(trailer));
    auto [bec, bn] = co_await asio::async_read(sock, batch, kWholeRest, kAwaitTuple);
    if (bec) co_return Lost(endpoint, bec.message());
    sum = req.length == 0 ? ValueChecksum(nullptr, 0)
                          : ValueChecksum(static_cast<const uint8_t*>(batch[0].data()), req.length);
  } else {
    ValueHasher hasher;
    for (;;) {
      const bool last = at == dest.size();
      if (last) batch.push_back(asio::buffer(trailer));
      auto [bec, bn] = co_await asio::async_read(sock, batch, kWholeRest, kAwaitTuple);
      if (bec) co_return Lost(endpoint, bec.message());
      for (size_t b = 0; b < batch.size() - (last ? 1 : 0); ++b) {
        hasher.Update(static_cast<const uint8_t*>(batch[b].data()), batch[b].size());
      }
      if (last) break;
      NextBatch(dest, &at, &offset, &batch);
    }
    sum = hasher.Digest();
  }
  if (sum != GetU64(trailer.data())) {
    co_return Status(Code::kIoError, "data channel: checksum mismatch on bytes from " + endpoint);
  }
  *in_step = true;
  if (checksum != nullptr) *checksum = sum;
  co_return Status::Ok();
}

template <class Stream>
asio::awaitable<Status> ReadOnce(Stream& sock, ReadRequest req, std::span<const MemoryPiece> dest,
                                 std::string endpoint, bool* in_step, uint64_t* checksum) {
  std::array<uint8_t, kRequestBytes> out{};
  EncodeRequest(req, out.data());
  if (Status st = co_await Send(sock, asio::buffer(out), endpoint); !st.ok()) co_return st;
  co_return co_await ReadAnswer(sock, req, dest, endpoint, in_step, checksum);
}

// The head of an AUTHORIZE carrying `request`.
std::array<uint8_t, kRequestBytes> AuthorizeHead(uint64_t ticket, std::string_view request) {
  ReadRequest req;
  req.op = kOpAuthorize;
  req.ticket = ticket;
  req.length = request.size();
  std::array<uint8_t, kRequestBytes> head{};
  EncodeRequest(req, head.data());
  return head;
}

// The answer to an AUTHORIZE already sent, into *out.
template <class Stream>
asio::awaitable<Status> ReadAuthorizeAnswer(Stream& sock, std::string* out,
                                            const std::string& endpoint, bool* in_step) {
  ResponseHead head;
  if (Status st = co_await ReadHead(sock, endpoint, &head); !st.ok()) co_return st;
  if (head.code == 0 && head.length > kMaxControlBytes) {
    co_return Status(Code::kProtocolError, "data channel: an authorization answer of " +
                                               std::to_string(head.length) + " bytes");
  }
  out->assign(head.length, '\0');
  auto [bec, bn] = co_await asio::async_read(sock, asio::buffer(*out), kWholeRest, kAwaitTuple);
  if (bec) co_return Lost(endpoint, bec.message());
  *in_step = true;
  if (head.code != 0) {
    co_return Status(static_cast<Code>(head.code), *out);  // the owner's own words
  }
  co_return Status::Ok();
}

// One AUTHORIZE: the request head and `request`, then the answer into *out.
template <class Stream>
asio::awaitable<Status> AuthorizeOnce(Stream& sock, uint64_t ticket, std::string_view request,
                                      std::string* out, std::string endpoint, bool* in_step) {
  const std::array<uint8_t, kRequestBytes> head = AuthorizeHead(ticket, request);
  const std::array<asio::const_buffer, 2> bufs{asio::buffer(head),
                                               asio::buffer(request.data(), request.size())};
  if (Status st = co_await Send(sock, bufs, endpoint); !st.ok()) co_return st;
  co_return co_await ReadAuthorizeAnswer(sock, out, endpoint, in_step);
}

// An AUTHORIZE and a READ behind it in one write, then both answers in order.
// Returns the authorization's outcome; *read_status the READ's. *in_step only
// when both answers were read to their ends.
template <class Stream>
asio::awaitable<Status> AuthorizeAndReadOnce(Stream& sock, uint64_t ticket,
                                             std::string_view request, std::string* out,
                                             ReadRequest first, std::span<const MemoryPiece> dest,
                                             uint64_t* checksum, Status* read_status,
                                             std::string endpoint, bool* in_step) {
  const std::array<uint8_t, kRequestBytes> head = AuthorizeHead(ticket, request);
  std::array<uint8_t, kRequestBytes> read_head{};
  EncodeRequest(first, read_head.data());
  const std::array<asio::const_buffer, 3> bufs{
      asio::buffer(head), asio::buffer(request.data(), request.size()), asio::buffer(read_head)};
  if (Status st = co_await Send(sock, bufs, endpoint); !st.ok()) {
    *read_status = st;
    co_return st;
  }
  bool auth_step = false;
  Status auth = co_await ReadAuthorizeAnswer(sock, out, endpoint, &auth_step);
  if (!auth_step) {  // the stream is broken: the READ's answer cannot be found
    *read_status = auth;
    co_return auth;
  }
  *read_status = co_await ReadAnswer(sock, first, dest, endpoint, in_step, checksum);
  co_return auth;
}

asio::awaitable<Status> ConnectOnce(tcp::socket& sock, tcp::endpoint ep, std::string endpoint) {
  auto [ec] = co_await sock.async_connect(ep, kAwaitTuple);
  if (ec) co_return Lost(endpoint, "cannot connect: " + ec.message());
  asio::error_code ignored;
  sock.set_option(tcp::no_delay(true), ignored);
  co_return Status::Ok();
}

asio::awaitable<Status> HandshakeOnce(asio::ssl::stream<tcp::socket>& tls, std::string endpoint) {
  auto [ec] = co_await tls.async_handshake(asio::ssl::stream_base::client, kAwaitTuple);
  if (ec) co_return Lost(endpoint, "TLS handshake failed: " + ec.message());
  co_return Status::Ok();
}

}  // namespace

TcpTransport::TcpTransport(TcpTransportOptions options)
    : options_([&] {
        if (options.connections_per_peer == 0) options.connections_per_peer = 1;
        return options;
      }()) {}

Result<std::unique_ptr<TcpTransport>> TcpTransport::Create(TcpTransportOptions options) {
  std::unique_ptr<TcpTransport> t(new TcpTransport(std::move(options)));
  if (t->options_.tls.enabled()) {
    Result<std::unique_ptr<asio::ssl::context>> ctx = MakeTlsContext(t->options_.tls, false);
    if (!ctx.ok()) return ctx.status();
    t->tls_ = std::move(*ctx);
  }
  return t;
}

TcpTransport::~TcpTransport() = default;

namespace {
// Whether an idle connection can carry a request. The owner sends nothing
// unasked, so anything to read on it (end of stream, a reset, a TLS
// close_notify) means that the owner has closed it: after its idle timeout,
// to make room for another peer, or in a restart. Checked before each reuse,
// so a request is not spent on a dead connection.
bool StillOpen(tcp::socket& sock) {
  char byte = 0;
  const ssize_t n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// The pool of an endpoint's authorization connections, apart from its READs'
// so that an authorization ahead never waits for a READ to free one.
std::string ControlPool(const std::string& endpoint) { return "authorize " + endpoint; }
}  // namespace

Result<std::unique_ptr<TcpTransport::Conn>> TcpTransport::Acquire(const std::string& endpoint,
                                                                  const std::string& pool_key) {
  {
    std::unique_lock lock(mu_);
    // Looked up again after each wake: Forget may have dropped the pool.
    const bool ready = cv_.wait_for(lock, std::chrono::milliseconds(options_.io_timeout_ms), [&] {
      const Pool& p = pools_[pool_key];
      return !p.idle.empty() || p.open < options_.connections_per_peer;
    });
    if (!ready) return Lost(endpoint, "no connection free in time");
    Pool& pool = pools_[pool_key];
    while (!pool.idle.empty()) {
      std::unique_ptr<Conn> c = std::move(pool.idle.back());
      pool.idle.pop_back();
      if (StillOpen(c->lowest())) return c;
      --pool.open;  // the owner closed it while it was idle: it closes here too
    }
    ++pool.open;  // reserved; opened below without the lock
  }
  auto conn = std::make_unique<Conn>();
  Result<tcp::endpoint> ep = ResolveEndpoint(conn->io, endpoint);
  Status st = ep.status();
  if (st.ok()) {
    st = RunBounded(conn->io, conn->sock, std::chrono::milliseconds(options_.connect_timeout_ms),
                    ConnectOnce(conn->sock, *ep, endpoint), endpoint);
  }
  if (st.ok() && tls_) {
    conn->tls = std::make_unique<asio::ssl::stream<tcp::socket>>(std::move(conn->sock), *tls_);
    st =
        RunBounded(conn->io, conn->lowest(), std::chrono::milliseconds(options_.connect_timeout_ms),
                   HandshakeOnce(*conn->tls, endpoint), endpoint);
  }
  if (!st.ok()) {
    Return(pool_key, std::move(conn), false);
    return st;
  }
  return conn;
}

void TcpTransport::Return(const std::string& pool_key, std::unique_ptr<Conn> conn, bool reusable) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool_key);
  if (it == pools_.end()) return;  // forgotten meanwhile: the connection just closes
  if (reusable) {
    it->second.idle.push_back(std::move(conn));
  } else if (it->second.open > 0) {
    --it->second.open;
  }
  cv_.notify_all();
}

Status TcpTransport::Read(const std::string& endpoint, const ReadRequest& req,
                          std::span<const MemoryPiece> dest, uint64_t* checksum) {
  Result<std::unique_ptr<Conn>> conn = Acquire(endpoint, endpoint);
  if (!conn.ok()) return conn.status();
  Conn& c = **conn;
  bool in_step = false;
  const auto budget = IoBudget(options_.io_timeout_ms, req.length);
  Status st = RunOn(
      c, budget, options_.spin_us, waits_,
      [&](auto& stream) { return ReadOnce(stream, req, dest, endpoint, &in_step, checksum); },
      endpoint);
  Return(endpoint, std::move(*conn), in_step);
  return st;
}

Result<std::string> TcpTransport::Authorize(const std::string& endpoint, uint64_t ticket,
                                            std::string_view request, int64_t timeout_ms) {
  const std::string pool_key = ControlPool(endpoint);
  Result<std::unique_ptr<Conn>> conn = Acquire(endpoint, pool_key);
  if (!conn.ok()) return conn.status();
  Conn& c = **conn;
  bool in_step = false;
  std::string answer;
  const auto budget = std::chrono::milliseconds(timeout_ms);
  Status st = RunOn(
      c, budget, options_.spin_us, waits_,
      [&](auto& stream) {
        return AuthorizeOnce(stream, ticket, request, &answer, endpoint, &in_step);
      },
      endpoint);
  Return(pool_key, std::move(*conn), in_step);
  if (!st.ok()) return st;
  return answer;
}

Result<std::string> TcpTransport::AuthorizeAndRead(const std::string& endpoint, uint64_t ticket,
                                                   std::string_view request, int64_t timeout_ms,
                                                   const ReadRequest& first,
                                                   std::span<const MemoryPiece> dest,
                                                   uint64_t* checksum, Status* read_status) {
  const std::string pool_key = ControlPool(endpoint);
  Result<std::unique_ptr<Conn>> conn = Acquire(endpoint, pool_key);
  if (!conn.ok()) {
    *read_status = conn.status();
    return conn.status();
  }
  Conn& c = **conn;
  bool in_step = false;
  std::string answer;
  *read_status = Status(Code::kUnavailable, "data channel to " + endpoint + ": timed out");
  const auto budget =
      std::chrono::milliseconds(timeout_ms) + IoBudget(options_.io_timeout_ms, first.length);
  Status st = RunOn(
      c, budget, options_.spin_us, waits_,
      [&](auto& stream) {
        return AuthorizeAndReadOnce(stream, ticket, request, &answer, first, dest, checksum,
                                    read_status, endpoint, &in_step);
      },
      endpoint);
  Return(pool_key, std::move(*conn), in_step);
  if (!st.ok()) return st;
  return answer;
}

TcpTransportWaits TcpTransport::Waits() const {
  return {waits_.polled.load(), waits_.caught.load(), waits_.slept.load()};
}

void TcpTransport::Forget(const std::string& endpoint) {
  std::vector<std::unique_ptr<Conn>> closing;
  std::lock_guard lock(mu_);
  for (const std::string& key : {endpoint, ControlPool(endpoint)}) {
    auto it = pools_.find(key);
    if (it == pools_.end()) continue;
    for (auto& c : it->second.idle) closing.push_back(std::move(c));
    pools_.erase(it);
  }
  cv_.notify_all();
}

}  // namespace tierkv::transfer
