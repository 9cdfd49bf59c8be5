#include "server/server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol/frame.h"
#include "protocol/socket_io.h"
#include "server/session.h"

namespace tierkv {
namespace {

Status IoError(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

}  // namespace

Server::Server(const ServerOptions& options, Store* store) : options_(options), store_(store) {}

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

Status Server::Start() {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return IoError("eventfd");
  if (!options_.uds_path.empty()) {
    if (Status st = ListenUnix(); !st.ok()) return st;
  }
  if (!options_.tcp_listen.empty()) {
    if (Status st = ListenTcp(); !st.ok()) return st;
  }
  if (uds_fd_ >= 0) acceptors_.emplace_back([this] { AcceptLoop(uds_fd_, true); });
  if (tcp_fd_ >= 0) acceptors_.emplace_back([this] { AcceptLoop(tcp_fd_, false); });
  return Status::Ok();
}

void Server::AcceptLoop(int listen_fd, bool unix_socket) {
  pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!stopping_.load()) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0 || stopping_.load()) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (!unix_socket) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    std::lock_guard<std::mutex> lock(conns_mu_);
    ReapFinished();
    if (conns_.size() >= options_.max_connections) {
      connections_refused_.fetch_add(1, std::memory_order_relaxed);
      const std::string frame = proto::FatalFrame(
          Status(Code::kUnavailable, "too many connections (max-connections=" +
                                         std::to_string(options_.max_connections) + ")"));
      (void)proto::WriteFull(fd, frame.data(), frame.size(), 100);
      close(fd);
      continue;
    }
    connections_total_.fetch_add(1, std::memory_order_relaxed);
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conn->unix_socket = unix_socket;
    Conn* raw = conn.get();
    const uint64_t id = next_session_.fetch_add(1);
    raw->thread = std::thread([this, raw, id] {
      {
        Session session(this, store_, raw->fd, raw->unix_socket, id);
        session.Run();
      }
      // The peer sees end-of-stream now; the descriptor itself is closed by the
      // acceptor (ReapFinished) or Stop, which own it.
      shutdown(raw->fd, SHUT_RDWR);
      raw->done.store(true);
    });
    conns_.push_back(std::move(conn));
  }
}

void Server::ReapFinished() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      close((*it)->fd);
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  for (auto& t : acceptors_) t.join();
  acceptors_.clear();
  if (uds_fd_ >= 0) {
    close(uds_fd_);
    unlink(options_.uds_path.c_str());
    uds_fd_ = -1;
  }
  if (tcp_fd_ >= 0) {
    close(tcp_fd_);
    tcp_fd_ = -1;
  }
  // Each session finishes the request it is executing, then sees end-of-stream.
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& c : conns_) shutdown(c->fd, SHUT_RD);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c->thread.join();
    close(c->fd);
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
    wake_fd_ = -1;
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
    for (const auto& c : conns_) s.connections_current += c->done.load() ? 0 : 1;
  }
  s.connections_total = connections_total_.load(std::memory_order_relaxed);
  s.connections_refused = connections_refused_.load(std::memory_order_relaxed);
  s.protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
  s.requests = requests_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tierkv
