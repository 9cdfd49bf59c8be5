#include "fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace tierkv::testing {
namespace {

void SetLingerZero(int fd) {
  linger l{1, 0};  // close sends RST
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

int Connect(const std::string& target) {
  const size_t colon = target.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(target.substr(colon + 1))));
  inet_pton(AF_INET, target.substr(0, colon).c_str(), &a.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

FaultProxy::FaultProxy(std::string target) : target_(std::move(target)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      pipe2(wake_, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "FaultProxy: cannot listen\n");
    std::abort();
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  close(wake_[1]);  // every poll sees POLLHUP on wake_[0]
  acceptor_.join();
  for (auto& t : pumps_) t.join();
  close(wake_[0]);
  close(listen_fd_);
}

void FaultProxy::SetMode(Mode mode) {
  {
    std::unique_lock<std::shared_mutex> lock(forward_mu_);
    mode_ = mode;
  }
  if (mode == Mode::kReset) ResetAll();
}

void FaultProxy::ResetAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : fds_) {
    SetLingerZero(fd);
    shutdown(fd, SHUT_RDWR);
  }
}

void FaultProxy::Accept() {
  while (!stop_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) <= 0) continue;
    if (p[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (mode_ == Mode::kReset) {
      SetLingerZero(fd);
      close(fd);
      continue;
    }
    pumps_.emplace_back([this, fd] { Pump(fd); });
  }
}

void FaultProxy::Pump(int client) {
  const int server = Connect(target_);
  if (server < 0) {
    SetLingerZero(client);
    close(client);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.insert(client);
    fds_.insert(server);
  }
  char buf[16384];
  bool open = true;
  while (open && !stop_) {
    // In blackhole mode nothing is read, so nothing is forwarded; the peers'
    // data waits in the socket buffers as if the network dropped it.
    const bool pass = mode_ != Mode::kBlackhole;
    pollfd p[3] = {{client, static_cast<short>(pass ? POLLIN : 0), 0},
                   {server, static_cast<short>(pass ? POLLIN : 0), 0},
                   {wake_[0], POLLIN, 0}};
    if (poll(p, 3, 50) < 0) break;
    if (p[2].revents != 0) break;
    std::shared_lock<std::shared_mutex> forwarding(forward_mu_);
    if (mode_ == Mode::kBlackhole) {  // possibly set while this pump polled
      // Forward nothing; a side that hung up (or a reset) still ends the pair.
      if (((p[0].revents | p[1].revents) & (POLLHUP | POLLERR)) != 0) open = false;
      continue;
    }
    for (int i = 0; i < 2 && open; ++i) {
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n <= 0 || mode_ == Mode::kReset) {
        open = false;
        break;
      }
      const int to = i == 0 ? server : client;
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
          open = false;
          break;
        }
        off += w;
      }
    }
    if (mode_ == Mode::kReset) open = false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.erase(client);
    fds_.erase(server);
  }
  if (mode_ == Mode::kReset) {
    SetLingerZero(client);
    SetLingerZero(server);
  }
  close(client);
  close(server);
}

}  // namespace tierkv::testing
