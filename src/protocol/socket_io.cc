#include "protocol/socket_io.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

namespace tierkv::proto {
namespace {

Status Errno(std::string_view what) {
  return Status(Code::kIoError, std::string(what) + ": " + std::strerror(errno));
}

// Waits until `fd` is ready for `events`; false on timeout.
Status WaitReady(int fd, short events, int timeout_ms, std::string_view what) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int rc = poll(&p, 1, timeout_ms);
    if (rc > 0) return Status::Ok();
    if (rc == 0) {
      return Status(Code::kIoError,
                    std::string(what) + ": peer stalled for " + std::to_string(timeout_ms) + " ms");
    }
    if (errno != EINTR) return Errno(what);
  }
}

}  // namespace

std::string Address::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  if (host.find(':') != std::string::npos) return "tcp://[" + host + "]:" + std::to_string(port);
  return "tcp://" + host + ":" + std::to_string(port);
}

Result<Address> ParseAddress(std::string_view text) {
  Address a;
  const std::string original(text);
  if (text.starts_with("unix://")) {
    text.remove_prefix(7);
  } else if (text.starts_with("unix:")) {
    text.remove_prefix(5);
  } else if (text.starts_with("tcp://")) {
    text.remove_prefix(6);
    a.kind = Address::Kind::kTcp;
  } else if (text.find('/') != std::string_view::npos) {
    // a bare path
  } else {
    a.kind = Address::Kind::kTcp;
  }
  if (a.kind == Address::Kind::kUnix) {
    if (text.empty()) return InvalidArgument("empty Unix socket path in '" + original + "'");
    if (text.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return InvalidArgument("Unix socket path too long: '" + original + "'");
    }
    a.path = std::string(text);
    return a;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    return InvalidArgument("address '" + original + "' needs HOST:PORT, unix:PATH or a path");
  }
  std::string_view host = text.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  if (host.empty()) return InvalidArgument("address '" + original + "' has an empty host");
  std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return InvalidArgument("address '" + original + "' has an invalid port");
  }
  a.host = std::string(host);
  a.port = static_cast<uint16_t>(port);
  return a;
}

SpinBackoff::Clock::duration SpinBackoff::OnLateYield(Clock::time_point now, Clock::duration took) {
  if (now - window_start_ > kWindow) {
    window_start_ = now;
    lost_ = Clock::duration::zero();
  }
  lost_ += took;
  if (lost_ <= kLostBudget) return Clock::duration::zero();
  const bool recent = quiet_.count() > 0 && now - quiet_until_ < kCalm;
  quiet_ = recent ? std::min<Clock::duration>(kMaxQuiet, 2 * quiet_) : kFirstQuiet;
  quiet_until_ = now + quiet_;
  window_start_ = now;  // the next window starts after this decision
  lost_ = Clock::duration::zero();
  return quiet_;
}

void WaitAverage::Record(int64_t took_us) {
  const int64_t took = std::clamp<int64_t>(took_us, 0, kLongestUs);
  avg_us_ = static_cast<int32_t>(known_ ? (3 * static_cast<int64_t>(avg_us_) + took) / 4 : took);
  known_ = true;
}

int WaitAverage::PollUs(int cap_us, int unknown_us) const {
  if (cap_us <= 0) return 0;
  if (!known_) return std::clamp(unknown_us, 0, cap_us);
  if (avg_us_ >= cap_us) return 0;
  return std::min(cap_us, 2 * avg_us_ + kMarginUs);
}

namespace {

thread_local SpinBackoff tls_backoff;

// One wait's busy-poll: open unless this thread is in a quiet period.
class SpinWindow {
 public:
  using Clock = SpinBackoff::Clock;
  explicit SpinWindow(int spin_us) {
    if (spin_us <= 0) return;
    last_ = Clock::now();
    if (!tls_backoff.MaySpin(last_)) return;
    until_ = last_ + std::chrono::microseconds(spin_us);
    open_ = true;
  }
  bool open() const { return open_; }

  // Gives the core away once between two polls; false when the window has
  // closed (its time is up, or the yield came back late).
  bool Yield() {
    sched_yield();
    const Clock::time_point now = Clock::now();
    if (now - last_ > SpinBackoff::kLateYield) {
      tls_backoff.OnLateYield(now, now - last_);
      return false;
    }
    last_ = now;
    return now <= until_;
  }

 private:
  Clock::time_point last_{};
  Clock::time_point until_{};
  bool open_ = false;
};

}  // namespace

FdQueue::~FdQueue() {
  for (size_t i = 0; i < n_; ++i) close(fds_[i]);
}

void FdQueue::Push(int fd) {
  if (n_ == kCapacity) {
    close(fd);
    return;
  }
  fds_[n_++] = fd;
}

int FdQueue::Take() {
  if (n_ == 0) return -1;
  const int fd = fds_[0];
  for (size_t i = 1; i < n_; ++i) fds_[i - 1] = fds_[i];
  --n_;
  return fd;
}

namespace {

// recv, or with `fds` a recvmsg whose passed descriptors go there.
ssize_t Receive(int fd, void* buf, size_t len, int flags, FdQueue* fds) {
  if (fds == nullptr) return recv(fd, buf, len, flags);
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t r = recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
  if (r < 0 || msg.msg_controllen == 0) return r;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      fds->Push(got);
    }
  }
  return r;
}

}  // namespace

bool SpinReadable(int fd, int spin_us) {
  SpinWindow spin(spin_us);
  if (!spin.open()) return false;
  for (;;) {
    char c;
    const ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    if (r >= 0 || (errno != EAGAIN && errno != EINTR)) return true;  // data, end or error
    if (!spin.Yield()) return false;
  }
}

Status ReadSome(int fd, void* buf, size_t min, size_t max, size_t* got, int timeout_ms, int spin_us,
                FdQueue* fds) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t done = 0;
  if (SpinWindow spin(spin_us); spin.open()) {
    while (done < min) {
      const ssize_t r = Receive(fd, p + done, max - done, MSG_DONTWAIT, fds);
      if (r > 0) {
        done += static_cast<size_t>(r);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        break;  // end of stream or an error: the blocking path reports it
      } else if (!spin.Yield()) {
        break;
      }
    }
  }
  while (done < min) {
    // With a timeout: try first, sleep in poll only when nothing is there yet.
    const ssize_t r = Receive(fd, p + done, max - done, timeout_ms >= 0 ? MSG_DONTWAIT : 0, fds);
    if (r > 0) {
      done += static_cast<size_t>(r);
    } else if (r == 0) {
      if (done == 0) return Status(Code::kUnavailable, "connection closed");
      return Status(Code::kIoError, "connection closed in the middle of a frame");
    } else if (errno == EAGAIN && timeout_ms >= 0) {
      if (Status st = WaitReady(fd, POLLIN, timeout_ms, "read"); !st.ok()) return st;
    } else if (errno != EINTR && errno != EAGAIN) {
      return Errno("read");
    }
  }
  *got = done;
  return Status::Ok();
}

Status ReadFull(int fd, void* buf, size_t n, int timeout_ms, int spin_us, FdQueue* fds) {
  size_t got = 0;
  return n == 0 ? Status::Ok() : ReadSome(fd, buf, n, n, &got, timeout_ms, spin_us, fds);
}

BufferedReader::BufferedReader() = default;
BufferedReader::~BufferedReader() = default;

uint8_t* BufferedReader::Buffer() {
  if (!buf_) buf_ = std::make_unique<uint8_t[]>(kCapacity);
  return buf_.get();
}

Status BufferedReader::Read(int fd, void* buf, size_t n, int timeout_ms, int spin_us) {
  auto* out = static_cast<uint8_t*>(buf);
  const size_t take = std::min(n, buffered());
  if (take > 0) std::memcpy(out, buf_.get() + begin_, take);
  begin_ += take;
  if (take == n) return Status::Ok();
  begin_ = end_ = 0;
  const size_t rest = n - take;
  size_t got = rest;
  Status st = rest >= kCapacity
                  ? ReadFull(fd, out + take, rest, timeout_ms, spin_us, fds_)
                  : ReadSome(fd, Buffer(), rest, kCapacity, &got, timeout_ms, spin_us, fds_);
  if (!st.ok()) {
    if (take > 0 && st.code() == Code::kUnavailable) {
      return Status(Code::kIoError, "connection closed in the middle of a frame");
    }
    return st;
  }
  if (rest < kCapacity) {
    std::memcpy(out + take, buf_.get(), rest);
    begin_ = rest;
    end_ = got;
  }
  return Status::Ok();
}

bool BufferedReader::SpinFill(int fd, int spin_us) {
  if (buffered() > 0) return true;
  SpinWindow spin(spin_us);
  if (!spin.open()) return false;
  uint8_t* b = Buffer();
  begin_ = end_ = 0;
  for (;;) {
    const ssize_t r = Receive(fd, b, kCapacity, MSG_DONTWAIT, fds_);
    if (r > 0) {
      end_ = static_cast<size_t>(r);
      return true;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) return true;  // end or error
    if (!spin.Yield()) return false;
  }
}

Status WriteFull(int fd, const void* buf, size_t n, int timeout_ms) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    const int flags = MSG_NOSIGNAL | (timeout_ms >= 0 ? MSG_DONTWAIT : 0);
    const ssize_t w = send(fd, p + done, n - done, flags);
    if (w >= 0) {
      done += static_cast<size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Status st = WaitReady(fd, POLLOUT, timeout_ms, "write"); !st.ok()) return st;
    } else if (errno != EINTR) {
      return Errno("write");
    }
  }
  return Status::Ok();
}

Status WriteFull2(int fd, std::string_view head, std::string_view tail, int timeout_ms) {
  size_t done = 0;  // of head + tail
  const size_t n = head.size() + tail.size();
  while (done < n) {
    iovec iov[2];
    int count = 0;
    if (done < head.size()) {
      iov[count++] = {const_cast<char*>(head.data() + done), head.size() - done};
    }
    const size_t tail_done = done > head.size() ? done - head.size() : 0;
    if (tail_done < tail.size()) {
      iov[count++] = {const_cast<char*>(tail.data() + tail_done), tail.size() - tail_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    const int flags = MSG_NOSIGNAL | (timeout_ms >= 0 ? MSG_DONTWAIT : 0);
    const ssize_t w = sendmsg(fd, &msg, flags);
    if (w >= 0) {
      done += static_cast<size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Status st = WaitReady(fd, POLLOUT, timeout_ms, "write"); !st.ok()) return st;
    } else if (errno != EINTR) {
      return Errno("write");
    }
  }
  return Status::Ok();
}

Status WriteWithFds(int fd, const void* buf, size_t n, std::span<const int> fds) {
  if (fds.empty() || fds.size() > kMaxPassedFds) {
    return Status(Code::kInvalidArgument, "1 to 2 descriptors per message");
  }
  iovec iov{const_cast<void*>(buf), n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  ssize_t w;
  do {
    w = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w < 0) return Errno("sendmsg");
  const size_t sent = static_cast<size_t>(w);
  if (sent < n) return WriteFull(fd, static_cast<const uint8_t*>(buf) + sent, n - sent, -1);
  return Status::Ok();
}

Status ReadWithFds(int fd, void* buf, size_t n, std::span<int> received) {
  for (int& r : received) r = -1;
  iovec iov{buf, n};
  // Room for more than are asked for, so that extra ones arrive and are closed
  // here rather than dropped by a truncated control buffer.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r;
  do {
    r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Errno("recvmsg");
  if (r == 0) return Status(Code::kUnavailable, "connection closed");
  size_t k = 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (k < received.size()) {
        received[k++] = got;
      } else {
        close(got);
      }
    }
  }
  const size_t got = static_cast<size_t>(r);
  if (got < n) return ReadFull(fd, static_cast<uint8_t*>(buf) + got, n - got, -1);
  return Status::Ok();
}

Result<int> Connect(const Address& address) {
  if (address.kind == Address::Kind::kUnix) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, address.path.data(), address.path.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      Status st(Code::kUnavailable,
                "connect to " + address.ToString() + ": " + std::strerror(errno));
      close(fd);
      return st;
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(address.port);
  if (int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status(Code::kUnavailable, "resolve " + address.host + ": " + gai_strerror(rc));
  }
  Status last(Code::kUnavailable, "no address for " + address.host);
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(res);
      return fd;
    }
    last = Status(Code::kUnavailable,
                  "connect to " + address.ToString() + ": " + std::strerror(errno));
    close(fd);
  }
  freeaddrinfo(res);
  return last;
}

}  // namespace tierkv::proto
