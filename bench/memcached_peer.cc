#include "memcached_peer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "bench_util.h"

namespace tierkv::bench {
namespace {

int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

MemcachedPeer::MemcachedPeer(int memory_mib) {
  dir_ = MakePeerDir("memcached");
  if (dir_.empty()) return;
  socket_ = dir_ + "/memcached.sock";
  const std::string memory = std::to_string(memory_mib);
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    // memcached refuses to run as root unless told which user to be.
    if (getuid() == 0) {
      execlp("memcached", "memcached", "-s", socket_.c_str(), "-a", "0700", "-m", memory.c_str(),
             "-I", "8m", "-u", "root", static_cast<char*>(nullptr));
    } else {
      execlp("memcached", "memcached", "-s", socket_.c_str(), "-a", "0700", "-m", memory.c_str(),
             "-I", "8m", static_cast<char*>(nullptr));
    }
    _exit(127);
  }
  if (pid < 0) return;
  const bool up = AwaitPeer(pid, [&] {
    const int fd = ConnectUnix(socket_);
    if (fd >= 0) close(fd);
    return fd >= 0;
  });
  if (up) pid_ = pid;
}

MemcachedPeer::~MemcachedPeer() { StopPeer(pid_, dir_); }

MemcachedConn::MemcachedConn(const std::string& socket) : fd_(ConnectUnix(socket)) {}
MemcachedConn::~MemcachedConn() {
  if (fd_ >= 0) close(fd_);
}

bool MemcachedConn::Send(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool MemcachedConn::Fill() {
  if (pos_ > 0) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
  const size_t have = in_.size();
  in_.resize(have + (256 << 10));
  const ssize_t n = recv(fd_, in_.data() + have, in_.size() - have, 0);
  in_.resize(have + (n > 0 ? static_cast<size_t>(n) : 0));
  return n > 0;
}

bool MemcachedConn::Line(std::string_view* line) {
  for (;;) {
    const size_t end = in_.find("\r\n", pos_);
    if (end != std::string::npos) {
      *line = std::string_view(in_).substr(pos_, end - pos_);
      pos_ = end + 2;
      return true;
    }
    if (!Fill()) return false;
  }
}

bool MemcachedConn::Take(char* dst, size_t n) {
  while (n > 0) {
    if (pos_ == in_.size() && !Fill()) return false;
    const size_t k = std::min(n, in_.size() - pos_);
    if (dst != nullptr) {
      std::memcpy(dst, in_.data() + pos_, k);
      dst += k;
    }
    pos_ += k;
    n -= k;
  }
  std::string_view rest;
  return Line(&rest) && rest.empty();
}

// "VA <size> ..." then the value, or "EN".
bool MemcachedConn::ReadValue(char* buf, size_t capacity, size_t* len) {
  std::string_view line;
  if (!Line(&line)) return false;
  *len = 0;
  if (line == "EN") return true;
  if (line.substr(0, 3) != "VA ") return false;
  size_t size = 0;
  const auto [p, ec] = std::from_chars(line.data() + 3, line.data() + line.size(), size);
  if (ec != std::errc() || size > capacity) return false;
  *len = size;
  return Take(buf, size);
}

bool MemcachedConn::Set(std::string_view key, std::string_view value) {
  out_.clear();
  out_.append("ms ").append(key).append(" ").append(std::to_string(value.size())).append("\r\n");
  out_.append(value).append("\r\n");
  std::string_view line;
  return Send(out_) && Line(&line) && line == "HD";
}

bool MemcachedConn::Get(std::string_view key, char* buf, size_t capacity, size_t* len) {
  out_.clear();
  out_.append("mg ").append(key).append(" v\r\n");
  return Send(out_) && ReadValue(buf, capacity, len);
}

bool MemcachedConn::BatchGet(std::span<const std::string> keys, std::span<std::string> bufs,
                             size_t* hits) {
  out_.clear();
  for (const std::string& k : keys) out_.append("mg ").append(k).append(" v\r\n");
  if (!Send(out_)) return false;
  *hits = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t len = 0;
    if (!ReadValue(bufs[i].data(), bufs[i].size(), &len)) return false;
    *hits += len > 0 ? 1 : 0;
  }
  return true;
}

bool MemcachedConn::BatchExist(std::span<const std::string> keys, size_t* hits) {
  out_.clear();
  for (const std::string& k : keys) out_.append("mg ").append(k).append("\r\n");
  if (!Send(out_)) return false;
  *hits = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string_view line;
    if (!Line(&line)) return false;
    if (line == "HD") {
      ++*hits;
    } else if (line != "EN") {
      return false;
    }
  }
  return true;
}

}  // namespace tierkv::bench
