#include "http/http_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/event_fd.h"
#include "http/http_head.h"

namespace tierkv {
namespace {

constexpr uint64_t kTagWake = ~0ull;
constexpr uint64_t kTagListen = ~0ull - 1;
constexpr int64_t kSweepEveryNs = 50'000'000;
constexpr int64_t kLingerNs = 2'000'000'000;  // reading what follows a closing answer

int64_t MsToNs(int ms) { return int64_t{ms} * 1'000'000; }

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

void Address(const sockaddr_storage& ss, std::string* ip, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    *port = ntohs(a->sin6_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    *port = ntohs(a->sin_port);
  }
  *ip = buf;
}

}  // namespace

struct HttpGate::Conn {
  // kLinger: answered and closing; what the client still sends is read and
  // dropped for a moment, so it sees the answer rather than a reset.
  enum class St { kHandshake, kRead, kWork, kWrite, kLinger };
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  St st = St::kRead;
  uint32_t interest = 0;  // registered epoll events (0: not registered)
  std::string in;         // bytes received and not yet answered
  std::string out;        // response being written
  size_t out_off = 0;
  size_t req_bytes = 0;    // of `in`, handed to the worker
  bool idle = false;       // waiting for the next request on a kept-alive connection
  bool has_bytes = false;  // some of the current request has arrived
  bool continue_sent = false;
  bool read_after_write = false;  // `out` is a 100 Continue: go on reading the body
  bool close_after = false;
  bool peer_closed = false;  // end of stream seen
  int64_t deadline_ns = 0;   // of the current phase
  int64_t idle_since_ns = 0;
  HttpExchange ex;
};

HttpGate::HttpGate(HttpGateOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpGate::~HttpGate() { Stop(); }

Status HttpGate::Start() {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.port);
  if (getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &res) != 0) {
    return Status(Code::kIoError, where + ": cannot resolve the host");
  }
  listen_fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (listen_fd_ >= 0) setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool bound = listen_fd_ >= 0 && bind(listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                     listen(listen_fd_, 1024) == 0;
  freeaddrinfo(res);
  if (!bound) {
    return Status(Code::kIoError, where + ": bind failed (" + std::strerror(errno) + ")");
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  std::string ip;
  Address(ss, &ip, &port_);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status(Code::kIoError, "epoll/eventfd failed");
  for (auto [fd, tag] : {std::pair{listen_fd_, kTagListen}, std::pair{wake_fd_, kTagWake}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  for (uint32_t i = 0; i < std::max<uint32_t>(1, options_.workers); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  loop_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void HttpGate::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    PokeEventFd(wake_fd_);
  }
  if (loop_.joinable()) loop_.join();
  jobs_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  while (!conns_.empty()) Drop(conns_.begin()->second.get());
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

HttpGateStats HttpGate::Stats() const {
  return {open_.load(),    accepted_.load(), shed_.load(),
          refused_.load(), timeouts_.load(), requests_.load()};
}

namespace {

constexpr MetricFamily kConns{"tierkv_http_connections", "gauge", "REST API connections open now"};
constexpr MetricFamily kAccepted{"tierkv_http_connections_accepted_total", "counter",
                                 "REST API connections accepted"};
constexpr MetricFamily kShed{"tierkv_http_connections_shed_total", "counter",
                             "REST API connections closed to make room for a new one"};
constexpr MetricFamily kRefused{"tierkv_http_connections_refused_total", "counter",
                                "REST API connections refused while every one was being served"};
constexpr MetricFamily kTimeouts{"tierkv_http_request_timeouts_total", "counter",
                                 "REST API requests or responses that missed the request timeout"};
constexpr MetricFamily kRequests{"tierkv_http_requests_total", "counter",
                                 "REST API requests read completely"};

}  // namespace

void HttpGate::ReportMetrics(const HttpGateStats& s, MetricSink& sink) {
  sink.One(kConns, s.connections);
  sink.One(kAccepted, s.accepted);
  sink.One(kShed, s.shed);
  sink.One(kRefused, s.refused);
  sink.One(kTimeouts, s.request_timeouts);
  sink.One(kRequests, s.requests);
}

void HttpGate::Loop() {
  epoll_event events[256];
  int64_t last_sweep = RealClock()->NowNanos();
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events, std::size(events), 100);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kTagWake) {
        uint64_t v;
        (void)!read(wake_fd_, &v, sizeof(v));
        if (stopping_.load()) return;
        Completed();
      } else if (tag == kTagListen) {
        Accept();
      } else if (auto it = conns_.find(tag); it != conns_.end()) {
        OnEvent(it->second.get(), events[i].events);
      }
    }
    const int64_t now = RealClock()->NowNanos();
    if (now - last_sweep >= kSweepEveryNs) {
      Sweep(now);
      last_sweep = now;
    }
  }
}

void HttpGate::Accept() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (conns_.size() >= options_.max_connections && !ShedOne()) {
      refused_.fetch_add(1);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd = fd;
    Address(peer, &c->ex.remote_ip, &c->ex.remote_port);
    sockaddr_storage local{};
    len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    Address(local, &c->ex.local_ip, &c->ex.local_port);
    const int64_t now = RealClock()->NowNanos();
    c->deadline_ns = now + MsToNs(options_.request_timeout_ms);
    c->idle_since_ns = now;
    if (options_.tls != nullptr) {
      c->ssl = SSL_new(options_.tls);
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
      c->st = Conn::St::kHandshake;
    }
    Conn* raw = c.get();
    conns_.emplace(raw->id, std::move(c));
    open_.fetch_add(1);
    accepted_.fetch_add(1);
    Want(raw, EPOLLIN);
  }
}

void HttpGate::Want(Conn* c, uint32_t events) {
  if (events == c->interest) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c->id;
  const int op = events == 0 ? EPOLL_CTL_DEL : c->interest == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  epoll_ctl(epoll_fd_, op, c->fd, &ev);
  c->interest = events;
}

void HttpGate::Drop(Conn* c) {
  Want(c, 0);
  if (c->ssl != nullptr) SSL_free(c->ssl);
  close(c->fd);
  open_.fetch_sub(1);
  conns_.erase(c->id);
}

void HttpGate::OnEvent(Conn* c, uint32_t events) {
  switch (c->st) {
    case Conn::St::kHandshake:
      return Handshake(c);
    case Conn::St::kRead:
      return ReadSome(c);
    case Conn::St::kWrite:
      return Flush(c);
    case Conn::St::kWork:
      return;  // not registered while a worker has it
    case Conn::St::kLinger:
      return Discard(c);
  }
}

void HttpGate::Handshake(Conn* c) {
  const int r = SSL_accept(c->ssl);
  if (r == 1) {
    c->st = Conn::St::kRead;
    Want(c, EPOLLIN);
    return ReadSome(c);  // application data may have come with the handshake
  }
  switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
      return Want(c, EPOLLIN);
    case SSL_ERROR_WANT_WRITE:
      return Want(c, EPOLLOUT);
    default:
      ERR_clear_error();
      return Drop(c);  // not TLS, or a certificate the CA does not vouch for
  }
}

void HttpGate::ReadSome(Conn* c) {
  // Enough for the largest acceptable request; the rest waits in the socket.
  const size_t cap = kMaxHttpHeadBytes + options_.max_body_bytes + 1;
  char buf[16384];
  while (c->in.size() < cap && !c->peer_closed) {
    ssize_t n;
    if (c->ssl != nullptr) {
      n = SSL_read(c->ssl, buf, sizeof(buf));
      if (n <= 0) {
        const int err = SSL_get_error(c->ssl, static_cast<int>(n));
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) break;
        ERR_clear_error();
        if (err != SSL_ERROR_ZERO_RETURN) return Drop(c);
        n = 0;
      }
    } else {
      n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        return Drop(c);
      }
    }
    if (n == 0) {
      c->peer_closed = true;  // a request sent before a half-close is still answered
      break;
    }
    if (!c->has_bytes) {
      c->has_bytes = true;
      if (c->idle) c->deadline_ns = RealClock()->NowNanos() + MsToNs(options_.request_timeout_ms);
      c->idle = false;
    }
    c->in.append(buf, static_cast<size_t>(n));
  }
  Parse(c);
}

void HttpGate::Parse(Conn* c) {
  if (c->st != Conn::St::kRead) return;
  HttpHead head;
  if (ParseHttpHead(c->in, &head) == HeadParse::kIncomplete) {
    if (head.error_status != 0) return Answer(c, head.error_status, head.error_message);
    if (c->peer_closed) return Drop(c);
    return;
  }
  if (head.error_status != 0) return Answer(c, head.error_status, head.error_message);
  c->close_after = head.close || c->peer_closed || stopping_.load();
  if (head.content_length > options_.max_body_bytes) {
    c->req_bytes = head.head_bytes;  // the routes answer 413 without the body
    c->close_after = true;
  } else if (c->in.size() < head.head_bytes + head.content_length) {
    if (c->peer_closed) return Drop(c);
    if (head.expect_continue && !c->continue_sent) {
      c->continue_sent = true;
      c->read_after_write = true;
      c->out = "HTTP/1.1 100 Continue\r\n\r\n";
      c->st = Conn::St::kWrite;
      return Flush(c);
    }
    return;
  } else {
    c->req_bytes = head.head_bytes + head.content_length;
  }
  c->st = Conn::St::kWork;
  c->ex.request = std::string_view(c->in.data(), c->req_bytes);
  c->ex.close = c->close_after;
  c->ex.response.clear();
  c->ex.closed_by_handler = false;
  Want(c, 0);
  requests_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.push_back({c->id, c});
  }
  jobs_cv_.notify_one();
}

void HttpGate::Answer(Conn* c, int status, const std::string& message) {
  const std::string body = options_.error_body ? options_.error_body(message) : message;
  c->out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
           "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  c->out_off = 0;
  c->close_after = true;
  c->read_after_write = false;
  c->st = Conn::St::kWrite;
  c->deadline_ns = RealClock()->NowNanos() + MsToNs(options_.request_timeout_ms);
  Flush(c);
}

void HttpGate::Flush(Conn* c) {
  while (c->out_off < c->out.size()) {
    const char* p = c->out.data() + c->out_off;
    const size_t left = c->out.size() - c->out_off;
    ssize_t n;
    if (c->ssl != nullptr) {
      n = SSL_write(c->ssl, p, static_cast<int>(std::min<size_t>(left, 1 << 30)));
      if (n <= 0) {
        const int err = SSL_get_error(c->ssl, static_cast<int>(n));
        if (err == SSL_ERROR_WANT_WRITE) return Want(c, EPOLLOUT);
        if (err == SSL_ERROR_WANT_READ) return Want(c, EPOLLIN);
        ERR_clear_error();
        return Drop(c);
      }
    } else {
      n = send(c->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return Want(c, EPOLLOUT);
        return Drop(c);
      }
    }
    c->out_off += static_cast<size_t>(n);
  }
  c->out.clear();
  c->out_off = 0;
  if (c->close_after && !c->read_after_write) {
    if (c->ssl != nullptr) SSL_shutdown(c->ssl);
    shutdown(c->fd, SHUT_WR);
    c->st = Conn::St::kLinger;
    c->deadline_ns = RealClock()->NowNanos() + kLingerNs;
    c->idle_since_ns = 0;  // the first to go when room is needed
    Want(c, EPOLLIN);
    return Discard(c);
  }
  c->st = Conn::St::kRead;
  Want(c, EPOLLIN);
  if (c->read_after_write) {
    c->read_after_write = false;  // the body of the same request comes now
  } else {
    const int64_t now = RealClock()->NowNanos();
    c->idle = true;
    c->has_bytes = false;
    c->continue_sent = false;
    c->idle_since_ns = now;
    c->deadline_ns = now + MsToNs(options_.keepalive_ms);
  }
  ReadSome(c);  // a pipelined request may be waiting (in `in` or inside TLS)
}

void HttpGate::Discard(Conn* c) {
  char buf[16384];
  for (;;) {
    const ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    return Drop(c);  // end of stream or an error: done
  }
}

void HttpGate::Completed() {
  std::vector<Job> done;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    done.swap(done_);
  }
  for (const Job& job : done) {
    auto it = conns_.find(job.id);
    if (it == conns_.end()) continue;
    Conn* c = it->second.get();
    c->in.erase(0, c->req_bytes);
    c->req_bytes = 0;
    c->out = std::move(c->ex.response);
    c->out_off = 0;
    c->close_after = c->ex.close || c->ex.closed_by_handler;
    c->st = Conn::St::kWrite;
    c->deadline_ns = RealClock()->NowNanos() + MsToNs(options_.request_timeout_ms);
    Flush(c);
  }
}

void HttpGate::WorkerLoop() {
  std::unique_lock<std::mutex> lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [this] { return stopping_.load() || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping
    const Job job = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    handler_(job.conn->ex);  // the loop does not touch a connection a worker has
    lock.lock();
    done_.push_back(job);
    PokeEventFd(wake_fd_);
  }
}

bool HttpGate::ShedOne() {
  // The connection idle the longest (kept alive or never spoke), else the one
  // that has been sending its request the longest; never one being served.
  Conn* pick = nullptr;
  bool pick_idle = false;
  for (const auto& [id, c] : conns_) {
    if (c->st == Conn::St::kWork) continue;
    const bool idle = (c->st == Conn::St::kRead && !c->has_bytes) || c->st == Conn::St::kLinger;
    if (pick == nullptr || (idle && !pick_idle) ||
        (idle == pick_idle && c->idle_since_ns < pick->idle_since_ns)) {
      pick = c.get();
      pick_idle = idle;
    }
  }
  if (pick == nullptr) return false;
  shed_.fetch_add(1);
  Drop(pick);
  return true;
}

void HttpGate::Sweep(int64_t now_ns) {
  std::vector<Conn*> late;
  for (const auto& [id, c] : conns_) {
    if (c->st != Conn::St::kWork && c->deadline_ns <= now_ns) late.push_back(c.get());
  }
  for (Conn* c : late) {
    if (c->st == Conn::St::kLinger) {
      Drop(c);
      continue;
    }
    const bool kept_alive_idle = c->st == Conn::St::kRead && c->idle;
    if (kept_alive_idle) {
      // The client may have sent its next request just now (it is in the
      // socket, its event not handled yet): closing would lose it. Keep the
      // connection; the read picks the request up.
      char b = 0;
      if (recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
        c->deadline_ns = now_ns + MsToNs(options_.request_timeout_ms);
        continue;
      }
    }
    if (!kept_alive_idle) timeouts_.fetch_add(1);
    if (c->st == Conn::St::kRead && c->has_bytes) {
      Answer(c, 408, "the request did not arrive within the request timeout");
    } else {
      Drop(c);
    }
  }
}

}  // namespace tierkv
