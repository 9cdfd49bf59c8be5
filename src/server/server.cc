#include "server/server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/event_fd.h"
#include "protocol/frame.h"
#include "protocol/socket_io.h"
#include "server/session.h"

namespace tierkv {
namespace {

Status IoError(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

}  // namespace

Server::Server(const ServerOptions& options, Store* store)
    : options_(options),
      store_(store),
      client_metrics_(options.max_metric_ranks),
      registered_({options.max_registered_bytes, options.max_registered_bytes_per_client,
                   options.max_registered_regions_per_client}) {
  // A client holds the pool's descriptor (HELLO): it is no memory of its own.
  const int own[] = {store->pool().fd(), store->pool().generations_fd()};
  registered_.RefuseFilesOf(own);
}

Server::~Server() { Stop(); }

Status Server::ListenUnix() {
  auto addr = proto::ParseAddress("unix:" + options_.uds_path);
  if (!addr.ok()) return addr.status();
  uds_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (uds_fd_ < 0) return IoError("socket");
  // A stale socket file from a previous run would make bind fail; a live one means
  // another manager owns the path, so refuse rather than steal it.
  struct stat st;
  if (lstat(options_.uds_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status(Code::kInvalidArgument,
                    "--uds-path " + options_.uds_path + " exists and is not a socket");
    }
    if (proto::Connect(*addr).ok()) {
      return Status(Code::kIoError,
                    "--uds-path " + options_.uds_path + " is in use by a running manager");
    }
    unlink(options_.uds_path.c_str());
  }
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, options_.uds_path.data(), options_.uds_path.size());
  if (bind(uds_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return IoError("bind " + options_.uds_path);
  }
  if (chmod(options_.uds_path.c_str(), options_.uds_mode) != 0) {
    return IoError("chmod " + options_.uds_path);
  }
  if (listen(uds_fd_, 128) != 0) return IoError("listen " + options_.uds_path);
  return Status::Ok();
}

Status Server::ListenTcp() {
  auto addr = proto::ParseAddress("tcp://" + options_.tcp_listen);
  if (!addr.ok()) return addr.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(addr->port);
  if (int rc = getaddrinfo(addr->host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status(Code::kInvalidArgument,
                  "--listen " + options_.tcp_listen + ": " + gai_strerror(rc));
  }
  tcp_fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (tcp_fd_ < 0) {
    freeaddrinfo(res);
    return IoError("socket");
  }
  int one = 1;
  setsockopt(tcp_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int rc = bind(tcp_fd_, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0) return IoError("bind " + options_.tcp_listen);
  if (listen(tcp_fd_, 128) != 0) return IoError("listen " + options_.tcp_listen);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(tcp_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  tcp_port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return Status::Ok();
}

namespace {

// epoll tags of the descriptors that are not connections (connection ids are small).
constexpr uint64_t kTagWake = ~0ull;
constexpr uint64_t kTagUds = ~0ull - 1;
constexpr uint64_t kTagTcp = ~0ull - 2;
constexpr auto kWorkerIdle = std::chrono::seconds(5);  // an idle worker ends after this

// Room for max_open_connections descriptors: lift the soft limit to the hard one.
void RaiseFileLimit(uint64_t wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= wanted) return;
  rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, wanted);
  (void)setrlimit(RLIMIT_NOFILE, &rl);
}

}  // namespace

// One open connection. Destroying it ends the session (its grants and leases
// are cleaned up), then the peer sees end-of-stream and the descriptor closes.
struct Server::Conn {
  uint64_t id = 0;
  int fd = -1;
  std::unique_ptr<Session> session;
  bool working = false;   // owned by a worker (or queued for one)
  int64_t parked_ns = 0;  // when it was last parked: idle order for shedding
  ~Conn() {
    session.reset();
    shutdown(fd, SHUT_RDWR);
    close(fd);
  }
};

Status Server::Start() {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return IoError("eventfd");
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return IoError("epoll_create1");
  if (!options_.uds_path.empty()) {
    if (Status st = ListenUnix(); !st.ok()) return st;
  }
  if (!options_.tcp_listen.empty()) {
    if (Status st = ListenTcp(); !st.ok()) return st;
  }
  RaiseFileLimit(options_.max_open_connections + 4096ull);
  auto add = [this](int fd, uint64_t tag) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  };
  if (!add(wake_fd_, kTagWake)) return IoError("epoll_ctl");
  if (uds_fd_ >= 0 && !add(uds_fd_, kTagUds)) return IoError("epoll_ctl");
  if (tcp_fd_ >= 0 && !add(tcp_fd_, kTagTcp)) return IoError("epoll_ctl");
  poller_ = std::thread([this] { PollLoop(); });
  return Status::Ok();
}

void Server::PollLoop() {
  epoll_event events[256];
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard<std::mutex> lock(conns_mu_);
      if (!handshakes_.empty()) {
        const int64_t wait = handshakes_.front().first - RealClock()->NowNanos();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(wait / 1'000'000 + 1, 1, 1000));
      }
    }
    const int n = epoll_wait(epoll_fd_, events, std::size(events), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kTagWake) return;  // Stop
      if (tag == kTagUds || tag == kTagTcp) {
        Accept(tag == kTagUds ? uds_fd_ : tcp_fd_, tag == kTagUds);
        continue;
      }
      Conn* conn = nullptr;
      {
        std::lock_guard<std::mutex> lock(conns_mu_);
        auto it = conns_.find(tag);
        if (it == conns_.end() || it->second->working) continue;
        conn = it->second.get();
        conn->working = true;
        ++working_;
      }
      Ready(conn);
    }
    CloseExpiredHandshakes(RealClock()->NowNanos());
  }
}

void Server::Accept(int listen_fd, bool unix_socket) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: no more waiting; other errors: try on the next wake-up
    if (!unix_socket) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    std::unique_ptr<Conn> victim;
    {
      std::lock_guard<std::mutex> lock(conns_mu_);
      if (conns_.size() >= options_.max_open_connections && !ShedOneLocked(&victim)) {
        connections_refused_.fetch_add(1, std::memory_order_relaxed);
        const std::string frame = proto::FatalFrame(
            Status(Code::kUnavailable, "too many connections (max-open-connections=" +
                                           std::to_string(options_.max_open_connections) +
                                           ", all of them working)"));
        (void)proto::WriteFull(fd, frame.data(), frame.size(), 100);
        close(fd);
        continue;
      }
      connections_total_.fetch_add(1, std::memory_order_relaxed);
      auto conn = std::make_unique<Conn>();
      conn->id = next_session_.fetch_add(1);
      conn->fd = fd;
      const int64_t now = RealClock()->NowNanos();
      const int64_t deadline = now + int64_t{options_.handshake_timeout_ms} * 1'000'000;
      conn->session = std::make_unique<Session>(this, store_, fd, unix_socket, conn->id, deadline);
      conn->parked_ns = now;
      handshakes_.emplace_back(deadline, conn->id);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      ev.data.u64 = conn->id;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
      conns_.emplace(conn->id, std::move(conn));
    }
    victim.reset();  // a shed session ends (its grants cleaned up) outside the lock
  }
}

bool Server::ShedOneLocked(std::unique_ptr<Conn>* victim) {
  // The oldest connection still in its handshake, else the longest idle session.
  Conn* pick = nullptr;
  for (const auto& [deadline, id] : handshakes_) {
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->working && !it->second->session->hello_done()) {
      pick = it->second.get();
      break;
    }
  }
  if (pick == nullptr) {
    for (const auto& [id, c] : conns_) {
      if (c->working || c->session->holds_pins()) continue;  // a pin holder's views stay valid
      if (pick == nullptr || c->parked_ns < pick->parked_ns) pick = c.get();
    }
  }
  if (pick == nullptr) return false;
  connections_shed_.fetch_add(1, std::memory_order_relaxed);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pick->fd, nullptr);
  auto it = conns_.find(pick->id);
  *victim = std::move(it->second);
  conns_.erase(it);
  return true;
}

void Server::CloseExpiredHandshakes(int64_t now_ns) {
  std::vector<std::unique_ptr<Conn>> expired;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    while (!handshakes_.empty() && handshakes_.front().first <= now_ns) {
      const uint64_t id = handshakes_.front().second;
      handshakes_.pop_front();
      auto it = conns_.find(id);
      // A working session enforces the deadline itself.
      if (it == conns_.end() || it->second->working || it->second->session->hello_done()) {
        continue;
      }
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
      expired.push_back(std::move(it->second));
      conns_.erase(it);
      CountHandshakeTimeout();
    }
    if (conns_.empty()) drained_cv_.notify_all();
  }
  expired.clear();  // outside the lock
}

void Server::Ready(Conn* conn) {
  std::lock_guard<std::mutex> lock(ready_mu_);
  ready_.push_back(conn);
  backlog_.store(ready_.size(), std::memory_order_relaxed);
  if (ready_.size() > idle_workers_ && workers_ < options_.max_connections) {
    ++workers_;
    std::thread([this] {
      pthread_setname_np(pthread_self(), "tierkv-worker");
      WorkerLoop();
    }).detach();
  } else {
    ready_cv_.notify_one();
  }
}

void Server::WorkerLoop() {
  std::unique_lock<std::mutex> lock(ready_mu_);
  for (;;) {
    if (ready_.empty()) {
      ++idle_workers_;
      const bool woke = ready_cv_.wait_for(lock, kWorkerIdle,
                                           [this] { return !ready_.empty() || stopping_.load(); });
      --idle_workers_;
      if (ready_.empty() && (!woke || stopping_.load())) break;
      if (ready_.empty()) continue;
    }
    Conn* conn = ready_.front();
    ready_.pop_front();
    backlog_.store(ready_.size(), std::memory_order_relaxed);
    lock.unlock();
    if (conn->session->Serve(options_.idle_park_ms)) {
      Park(conn);
    } else {
      Close(conn);
    }
    lock.lock();
  }
  // Nothing of `this` is touched after the count drops: Stop may return then.
  --workers_;
  workers_done_cv_.notify_all();
}

void Server::Park(Conn* conn) {
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    if (!stopping_.load()) {
      conn->working = false;
      --working_;
      conn->parked_ns = RealClock()->NowNanos();
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      ev.data.u64 = conn->id;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, &ev);
      return;
    }
  }
  Close(conn);  // stopping: end it instead
}

void Server::Close(Conn* conn) {
  std::unique_ptr<Conn> owned;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    if (conn->working) --working_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
    auto it = conns_.find(conn->id);
    owned = std::move(it->second);
    conns_.erase(it);
  }
  owned.reset();
  std::lock_guard<std::mutex> lock(conns_mu_);
  if (conns_.empty()) drained_cv_.notify_all();
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    PokeEventFd(wake_fd_);
  }
  if (poller_.joinable()) poller_.join();
  if (uds_fd_ >= 0) {
    close(uds_fd_);
    unlink(options_.uds_path.c_str());
    uds_fd_ = -1;
  }
  if (tcp_fd_ >= 0) {
    close(tcp_fd_);
    tcp_fd_ = -1;
  }
  // Parked connections end now; working ones finish their request, then see
  // end-of-stream.
  std::vector<std::unique_ptr<Conn>> parked;
  {
    std::unique_lock<std::mutex> lock(conns_mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->second->working) {
        shutdown(it->second->fd, SHUT_RD);
        ++it;
      } else {
        parked.push_back(std::move(it->second));
        it = conns_.erase(it);
      }
    }
  }
  parked.clear();
  {
    std::unique_lock<std::mutex> lock(conns_mu_);
    drained_cv_.wait(lock, [this] { return conns_.empty(); });
  }
  {
    std::unique_lock<std::mutex> lock(ready_mu_);
    ready_cv_.notify_all();
    workers_done_cv_.wait(lock, [this] { return workers_ == 0; });
  }
  for (int* fd : {&epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

std::string Server::uds_address() const {
  return options_.uds_path.empty() ? "" : "unix:" + options_.uds_path;
}

std::string Server::tcp_address() const {
  if (options_.tcp_listen.empty()) return "";
  auto addr = proto::ParseAddress("tcp://" + options_.tcp_listen);
  if (!addr.ok()) return "";
  addr->port = tcp_port_;
  return addr->ToString();
}

ServerStats Server::Stats() const {
  ServerStats s;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    s.connections_current = conns_.size();
    s.connections_working = working_;
  }
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    s.worker_threads = workers_;
  }
  s.connections_total = connections_total_.load(std::memory_order_relaxed);
  s.connections_refused = connections_refused_.load(std::memory_order_relaxed);
  s.connections_shed = connections_shed_.load(std::memory_order_relaxed);
  s.handshake_timeouts = handshake_timeouts_.load(std::memory_order_relaxed);
  s.protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
  for (int i = 0; i < kRequestWaitKinds; ++i) {
    s.request_waits[i] = request_waits_[i].load(std::memory_order_relaxed);
    s.requests += s.request_waits[i];
  }
  return s;
}

}  // namespace tierkv
