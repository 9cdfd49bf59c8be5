#include "transfer/data_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ssl.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "common/tracer.h"
#include "media/checksum.h"
#include "transfer/asio_util.h"

namespace tierkv::transfer {

using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

// Writes `bufs` whole unless `timer` (already set) expires first; false when
// the write failed or timed out.
template <class Stream, class Buffers>
asio::awaitable<bool> WriteBounded(Stream& sock, asio::steady_timer& timer, const Buffers& bufs) {
  auto r = co_await (asio::async_write(sock, bufs, kWholeRest, kAwaitTuple) ||
                     timer.async_wait(kAwaitTuple));
  co_return r.index() == 0 && !std::get<0>(std::get<0>(r));
}

// An AUTHORIZE's bytes are read in pieces of at most this many, each piece's
// memory taken as it comes: a peer that announces a large request holds only
// what it has sent.
constexpr size_t kBodyPiece = 64 << 10;

// How long a new connection to a full server waits for one of the open ones
// to finish its answer (and become one that can be shed), polled this often.
constexpr auto kFullWait = std::chrono::milliseconds(100);
constexpr auto kFullPoll = std::chrono::milliseconds(1);

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// An open connection, as Accept sees it when the server is full and one must
// make room (Impl::ShedOne).
struct DataServer::Slot {
  asio::any_io_executor executor;  // the connection's event loop
  // Its lowest layer; closed on `executor` only, while `open`.
  asio::ip::tcp::socket* socket = nullptr;
  // Since when it has waited for a request (steady ns; from accept for its
  // first); 0 while it reads, decides or answers one.
  std::atomic<int64_t> waiting_since{0};
  std::atomic<bool> answered{false};  // it has had an answer that was not an error
  bool open = true;                   // under Impl::slots_mu; cleared on `executor`
  bool shed = false;                  // under Impl::slots_mu: chosen to make room
};

struct DataServer::Impl {
  Impl(DataServerOptions o, GrantSource* s) : options(std::move(o)), source(s) {}
  // `sum`, or a wrong checksum when options.corrupt_read says so.
  uint64_t Corrupted(uint64_t sum) const {
    return options.corrupt_read && options.corrupt_read() ? ~sum : sum;
  }

  asio::awaitable<void> Accept();
  // Whether a new connection may be served: fewer than max_connections are
  // open, or one is shed (ShedOne), or one can be within kFullWait.
  asio::awaitable<bool> MakeRoom();
  // Closes the open connection that has waited the longest for its first
  // request, else the one idle the longest, and says whether there was one
  // (every connection may be answering a request).
  bool ShedOne();
  // Keeps `sock` (a new connection's lowest layer) in `slots` until the
  // returned holder goes.
  std::shared_ptr<Slot> Enter(tcp::socket& sock);
  void Leave(const std::shared_ptr<Slot>& slot);
  asio::awaitable<void> Serve(tcp::socket sock);
  // With TLS: the handshake (the peer must present a certificate the CA
  // signed), then the same requests.
  asio::awaitable<void> ServeTls(tcp::socket sock);
  template <class Stream>
  asio::awaitable<void> ServeOn(Stream& sock, Slot& slot);
  // Writes an answer's head, body and trailer: the checksum of the `length`
  // bytes at `data`, which are bytes [offset, offset + length) of a value of
  // `size` bytes. A checksum `digests` knows is sent as it is; otherwise the
  // body is hashed piece by piece as the pieces go out and the result recorded
  // in `digests` (when not null). False when the connection is gone.
  template <class Stream>
  asio::awaitable<bool> SendBody(Stream& sock, asio::steady_timer& timer,
                                 std::span<const uint8_t> head, const uint8_t* data,
                                 uint64_t offset, uint64_t length, uint64_t size,
                                 std::span<uint8_t> trailer, ValueDigests* digests);
  // Sends an error reply; false when the connection is gone.
  template <class Stream>
  asio::awaitable<bool> Refuse(Stream& sock, asio::steady_timer& timer, const Status& st);
  // An AUTHORIZE: reads its `length` bytes, has the source decide (at once
  // when that needs no wait, else on the blocking pool, never blocking an
  // event loop) and sends the answer; false when the connection is gone.
  template <class Stream>
  asio::awaitable<bool> Authorize(Stream& sock, asio::steady_timer& timer, Slot& slot,
                                  uint64_t ticket, uint64_t length);

  const DataServerOptions options;
  GrantSource* const source;
  std::unique_ptr<asio::ssl::context> tls;  // null: plaintext
  // Where AUTHORIZE decisions run: they may block (an SSD rewarm, the budget
  // wait of up to 3 s), which an event loop serving READs must not.
  std::unique_ptr<asio::thread_pool> blocking;
  // One io_context per thread, each connection on one of them for its whole
  // life (round robin at accept), so an answer's steps never hop threads.
  // The acceptor runs on the first. All go in Stop: destroying a context
  // destroys the coroutines of the connections still open, and with them the
  // grant holds they had.
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  size_t next_io = 0;  // the acceptor's coroutine only
  std::mutex slots_mu;
  std::list<std::shared_ptr<Slot>> slots;  // every open connection
  bool stopped = false;
  int port = 0;
  std::atomic<uint64_t> connections{0}, connections_total{0}, refused{0}, shed{0}, reads{0},
      refusals{0}, bytes_out{0}, checksums_reused{0}, authorizations{0}, decided_at_once{0},
      decided_on_pool{0};
};

asio::awaitable<void> DataServer::Impl::Accept() {
  for (;;) {
    asio::io_context& target = *ios[next_io];
    next_io = (next_io + 1) % ios.size();
    auto [ec, sock] = co_await acceptor->async_accept(target, kAwaitTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) co_return;
      continue;  // a failed accept (EMFILE, a reset peer) ends nothing else
    }
    if (!co_await MakeRoom()) {
      refused.fetch_add(1);
      asio::error_code ignored;
      sock.close(ignored);
      continue;
    }
    connections.fetch_add(1);
    connections_total.fetch_add(1);
    asio::co_spawn(target, tls ? ServeTls(std::move(sock)) : Serve(std::move(sock)),
                   [this](std::exception_ptr) { connections.fetch_sub(1); });
  }
}

asio::awaitable<bool> DataServer::Impl::MakeRoom() {
  if (connections.load() < options.max_connections || ShedOne()) co_return true;
  // Every connection is answering a request. One that has just sent its
  // answer becomes idle a moment later: wait for one, up to kFullWait.
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (auto waited = std::chrono::milliseconds(0); waited < kFullWait; waited += kFullPoll) {
    timer.expires_after(kFullPoll);
    co_await timer.async_wait(kAwaitTuple);
    if (connections.load() < options.max_connections || ShedOne()) co_return true;
  }
  co_return false;
}

bool DataServer::Impl::ShedOne() {
  std::shared_ptr<Slot> victim;
  {
    std::lock_guard lock(slots_mu);
    std::pair<bool, int64_t> first{true, 0};  // (answered, waiting since): smallest goes
    for (const std::shared_ptr<Slot>& s : slots) {
      const int64_t since = s->waiting_since.load(std::memory_order_relaxed);
      if (!s->open || s->shed || since == 0) continue;
      const std::pair<bool, int64_t> key{s->answered.load(std::memory_order_relaxed), since};
      if (!victim || key < first) {
        victim = s;
        first = key;
      }
    }
    if (!victim) return false;
    victim->shed = true;
  }
  // On the connection's own loop, where its requests begin: one that began
  // answering a request meanwhile is left alone (the server is then one over
  // its limit until a connection ends).
  asio::post(victim->executor, [this, victim] {
    if (!victim->open) return;
    if (victim->waiting_since.load(std::memory_order_relaxed) == 0) {
      std::lock_guard lock(slots_mu);
      victim->shed = false;  // it may be chosen again once it waits again
      return;
    }
    asio::error_code ignored;
    victim->socket->close(ignored);  // its wait for a request ends, and the connection with it
    shed.fetch_add(1, std::memory_order_relaxed);
  });
  return true;
}

std::shared_ptr<DataServer::Slot> DataServer::Impl::Enter(tcp::socket& sock) {
  auto slot = std::make_shared<Slot>();
  slot->executor = sock.get_executor();
  slot->socket = &sock;
  slot->waiting_since.store(SteadyNanos(), std::memory_order_relaxed);
  std::lock_guard lock(slots_mu);
  slots.push_back(slot);
  return slot;
}

void DataServer::Impl::Leave(const std::shared_ptr<Slot>& slot) {
  std::lock_guard lock(slots_mu);
  slot->open = false;
  slots.remove(slot);
}

template <class Stream>
asio::awaitable<bool> DataServer::Impl::Refuse(Stream& sock, asio::steady_timer& timer,
                                               const Status& st) {
  refusals.fetch_add(1);
  std::string text = st.message().substr(0, kMaxErrorBytes);
  std::array<uint8_t, kResponseBytes> head{};
  EncodeResponse({static_cast<uint32_t>(st.code()), text.size()}, head.data());
  const std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(text)};
  timer.expires_after(std::chrono::milliseconds(options.io_timeout_ms));
  co_return co_await WriteBounded(sock, timer, bufs);
}

// Leaves `slots` when the connection's coroutine ends, however it ends (its
// frame is destroyed without a return when the server stops).
struct DataServer::SlotHolder {
  Impl& impl;
  std::shared_ptr<Slot> slot;
  ~SlotHolder() { impl.Leave(slot); }
};

asio::awaitable<void> DataServer::Impl::Serve(tcp::socket sock) {
  asio::error_code ignored;
  sock.set_option(tcp::no_delay(true), ignored);
  const SlotHolder held{*this, Enter(sock)};
  co_await ServeOn(sock, *held.slot);
}

asio::awaitable<void> DataServer::Impl::ServeTls(tcp::socket sock) {
  asio::error_code ignored;
  sock.set_option(tcp::no_delay(true), ignored);
  asio::ssl::stream<tcp::socket> stream(std::move(sock), *tls);
  const SlotHolder held{*this, Enter(stream.next_layer())};
  asio::steady_timer timer(stream.get_executor());
  timer.expires_after(std::chrono::milliseconds(options.io_timeout_ms));
  auto shook = co_await (stream.async_handshake(asio::ssl::stream_base::server, kAwaitTuple) ||
                         timer.async_wait(kAwaitTuple));
  if (shook.index() != 0 || std::get<0>(std::get<0>(shook))) {
    // No certificate the CA signed, or no TLS at all (a connection closed to
    // make room is counted as shed).
    if (!held.slot->shed) refused.fetch_add(1);
    co_return;
  }
  co_await ServeOn(stream, *held.slot);
}

template <class Stream>
asio::awaitable<void> DataServer::Impl::ServeOn(Stream& sock, Slot& slot) {
  asio::steady_timer timer(sock.get_executor());
  std::array<uint8_t, kRequestBytes> in{};
  std::array<uint8_t, kResponseBytes> head{};
  std::array<uint8_t, kTrailerBytes> trailer{};
  for (bool first = true;; first = false) {
    if (!first) slot.waiting_since.store(SteadyNanos(), std::memory_order_relaxed);
    timer.expires_after(std::chrono::milliseconds(options.idle_timeout_ms));
    auto got = co_await (asio::async_read(sock, asio::buffer(in), kWholeRest, kAwaitTuple) ||
                         timer.async_wait(kAwaitTuple));
    if (got.index() != 0 || std::get<0>(std::get<0>(got))) co_return;  // idle, closed or broken
    ReadRequest req;
    if (Status st = DecodeRequest(in.data(), &req); !st.ok()) {
      (void)co_await Refuse(sock, timer, st);
      co_return;  // the byte stream cannot be trusted any more
    }
    if (req.op == kOpAuthorize) {
      if (!co_await Authorize(sock, timer, slot, req.ticket, req.length)) co_return;
      continue;
    }
    slot.waiting_since.store(0, std::memory_order_relaxed);
    Result<GrantSpan> span = source->Open(req.ticket, req.item, req.generation);
    if (!span.ok()) {
      if (!co_await Refuse(sock, timer, span.status())) co_return;
      continue;
    }
    if (req.offset > span->size || req.length > span->size - req.offset) {
      const Status st =
          InvalidArgument("range " + std::to_string(req.offset) + "+" + std::to_string(req.length) +
                          " is outside the item's " + std::to_string(span->size) + " bytes");
      if (!co_await Refuse(sock, timer, st)) co_return;
      continue;
    }
    static Tracepoint* const tp = Tracer::Global().Get("TP_PEER_READ");
    TraceScope trace(tp);  // the answer, from the grant check to the trailer sent
    const uint8_t* data = span->data + req.offset;
    EncodeResponse({0, req.length}, head.data());
    // Counted as the answer starts, so a reader that has all the bytes also
    // sees them counted.
    reads.fetch_add(1, std::memory_order_relaxed);
    bytes_out.fetch_add(req.length, std::memory_order_relaxed);
    timer.expires_after(IoBudget(options.io_timeout_ms, req.length));
    if (!co_await SendBody(sock, timer, head, data, req.offset, req.length, span->size, trailer,
                           span->digests)) {
      co_return;
    }
    slot.answered.store(true, std::memory_order_relaxed);
    trace.End(true);
  }
}

template <class Stream>
asio::awaitable<bool> DataServer::Impl::Authorize(Stream& sock, asio::steady_timer& timer,
                                                  Slot& slot, uint64_t ticket, uint64_t length) {
  std::string request;
  timer.expires_after(IoBudget(options.io_timeout_ms, length));
  while (request.size() < length) {
    const size_t at = request.size();
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBodyPiece, length - at));
    request.resize(at + n);
    auto got =
        co_await (asio::async_read(sock, asio::buffer(request.data() + at, n), kAwaitTuple) ||
                  timer.async_wait(kAwaitTuple));
    if (got.index() != 0 || std::get<0>(std::get<0>(got))) co_return false;
  }
  slot.waiting_since.store(0, std::memory_order_relaxed);
  Result<std::string> answer = Status(Code::kInternal, "the authorization did not run");
  // Decided here when that needs no wait (no thread hop: the answer goes out
  // at once); otherwise on the blocking pool.
  if (std::optional<Result<std::string>> quick = source->TryAuthorize(ticket, request)) {
    answer = std::move(*quick);
    decided_at_once.fetch_add(1, std::memory_order_relaxed);
  } else {
    // This coroutine waits, suspended, while the pool decides: its frame (and
    // so `request` and `answer`) outlives the call.
    co_await asio::co_spawn(
        *blocking,
        [&]() -> asio::awaitable<void> {
          answer = source->Authorize(ticket, request);
          co_return;
        },
        asio::use_awaitable);
    decided_on_pool.fetch_add(1, std::memory_order_relaxed);
  }
  if (!answer.ok()) co_return co_await Refuse(sock, timer, answer.status());
  authorizations.fetch_add(1, std::memory_order_relaxed);
  slot.answered.store(true, std::memory_order_relaxed);
  std::array<uint8_t, kResponseBytes> head{};
  EncodeResponse({0, answer->size()}, head.data());
  timer.expires_after(IoBudget(options.io_timeout_ms, answer->size()));
  co_return co_await WriteBounded(
      sock, timer, std::array<asio::const_buffer, 2>{asio::buffer(head), asio::buffer(*answer)});
}

template <class Stream>
asio::awaitable<bool> DataServer::Impl::SendBody(Stream& sock, asio::steady_timer& timer,
                                                 std::span<const uint8_t> head, const uint8_t* data,
                                                 uint64_t offset, uint64_t length, uint64_t size,
                                                 std::span<uint8_t> trailer,
                                                 ValueDigests* digests) {
  const uint64_t known = digests != nullptr ? digests->Find(offset, length, size) : 0;
  if (known != 0) checksums_reused.fetch_add(1, std::memory_order_relaxed);
  if (known != 0 || length <= kHashPiece) {  // the hash known or taken first: all in one write
    const uint64_t sum = known != 0 ? known : ValueChecksum(data, length);
    if (digests != nullptr && known == 0) digests->Remember(offset, length, size, sum);
    PutU64(Corrupted(sum), trailer.data());
    co_return co_await WriteBounded(
        sock, timer,
        std::array<asio::const_buffer, 3>{asio::buffer(head.data(), head.size()),
                                          asio::buffer(data, length),
                                          asio::buffer(trailer.data(), trailer.size())});
  }
  // The head goes with the first piece; each piece is hashed once it is in
  // the socket, while the reader takes it; the trailer carries the hash.
  ValueHasher hasher;
  for (uint64_t off = 0; off < length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kHashPiece, length - off));
    const std::array<asio::const_buffer, 2> bufs{
        off == 0 ? asio::buffer(head.data(), head.size()) : asio::const_buffer(),
        asio::buffer(data + off, n)};
    if (!co_await WriteBounded(sock, timer, bufs)) co_return false;
    hasher.Update(data + off, n);
    off += n;
  }
  const uint64_t sum = hasher.Digest();
  PutU64(Corrupted(sum), trailer.data());
  if (digests != nullptr) digests->Remember(offset, length, size, sum);
  co_return co_await WriteBounded(sock, timer, asio::buffer(trailer.data(), trailer.size()));
}

DataServer::DataServer(DataServerOptions options, GrantSource* source)
    : impl_(std::make_unique<Impl>(std::move(options), source)) {}

DataServer::~DataServer() { Stop(); }

Status DataServer::Start() {
  if (impl_->stopped) return Status(Code::kInternal, "the data channel cannot be restarted");
  if (!impl_->ios.empty()) return Status(Code::kInternal, "the data channel is already started");
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
    impl_->ios.push_back(std::make_unique<asio::io_context>(1));
  }
  asio::io_context& first = *impl_->ios.front();
  impl_->acceptor = std::make_unique<tcp::acceptor>(first);
  Result<tcp::endpoint> ep = ResolveEndpoint(first, impl_->options.listen);
  if (!ep.ok()) return InvalidArgument("--data-addr: " + ep.status().message());
  asio::error_code ec;
  impl_->acceptor->open(ep->protocol(), ec);
  if (!ec) impl_->acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor->bind(*ep, ec);
  if (!ec) impl_->acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(Code::kUnavailable,
                  "cannot listen on --data-addr " + impl_->options.listen + ": " + ec.message());
  }
  impl_->port = impl_->acceptor->local_endpoint().port();
  if (impl_->options.tls.enabled()) {
    Result<std::unique_ptr<asio::ssl::context>> ctx = MakeTlsContext(impl_->options.tls, true);
    if (!ctx.ok()) return ctx.status();
    impl_->tls = std::move(*ctx);
  }
  impl_->blocking = std::make_unique<asio::thread_pool>(2);
  asio::co_spawn(first, impl_->Accept(), asio::detached);
  for (auto& io : impl_->ios) {
    impl_->work.push_back(asio::make_work_guard(*io));
    impl_->threads.emplace_back([ctx = io.get()] { ctx->run(); });
  }
  return Status::Ok();
}

void DataServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->work.clear();
  for (auto& io : impl_->ios) io->stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // Decisions still running refer to their connections' frames: they end
  // before the event loops (and the frames) go.
  if (impl_->blocking) impl_->blocking->join();
  impl_->acceptor.reset();
  impl_->ios.clear();
}

int DataServer::port() const { return impl_->port; }

DataServerStats DataServer::Stats() const {
  DataServerStats s;
  s.connections = impl_->connections.load();
  s.connections_total = impl_->connections_total.load();
  s.refused = impl_->refused.load();
  s.shed = impl_->shed.load();
  s.reads = impl_->reads.load();
  s.refusals = impl_->refusals.load();
  s.bytes_out = impl_->bytes_out.load();
  s.checksums_reused = impl_->checksums_reused.load();
  s.authorizations = impl_->authorizations.load();
  s.decided_at_once = impl_->decided_at_once.load();
  s.decided_on_pool = impl_->decided_on_pool.load();
  return s;
}

}  // namespace tierkv::transfer
