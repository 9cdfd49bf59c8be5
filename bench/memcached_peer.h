// The memcached peer of the benchmark: a memcached started on a private Unix
// socket and a client speaking its meta text protocol (ms / mg / mn), one
// connection per thread, with pipelined batches like tierkv's batch calls.
#ifndef TIERKV_BENCH_MEMCACHED_PEER_H_
#define TIERKV_BENCH_MEMCACHED_PEER_H_

#include <sys/types.h>

#include <span>
#include <string>
#include <string_view>

namespace tierkv::bench {

class MemcachedPeer {
 public:
  // Starts memcached (-m memory_mib, items up to 8 MiB); ok() tells whether
  // it came up.
  explicit MemcachedPeer(int memory_mib);
  ~MemcachedPeer();  // stops it
  MemcachedPeer(const MemcachedPeer&) = delete;
  MemcachedPeer& operator=(const MemcachedPeer&) = delete;
  bool ok() const { return pid_ > 0; }
  const std::string& socket() const { return socket_; }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_;
};

// One connection. Not thread-safe. Every call returns false on a protocol or
// transport error (the connection is then unusable).
class MemcachedConn {
 public:
  explicit MemcachedConn(const std::string& socket);
  ~MemcachedConn();
  MemcachedConn(const MemcachedConn&) = delete;
  MemcachedConn& operator=(const MemcachedConn&) = delete;
  bool ok() const { return fd_ >= 0; }

  bool Set(std::string_view key, std::string_view value);
  // Copies the value into `buf` (at most `capacity` bytes); *len is its size,
  // 0 on a miss.
  bool Get(std::string_view key, char* buf, size_t capacity, size_t* len);
  // One write of all the requests, then every answer: values are copied into
  // bufs[i] (each `capacity` bytes). *hits counts the keys found.
  bool BatchGet(std::span<const std::string> keys, std::span<std::string> bufs, size_t* hits);
  // As BatchGet, asking only whether each key is stored (mg without v).
  bool BatchExist(std::span<const std::string> keys, size_t* hits);

 private:
  bool Send(const std::string& bytes);
  bool Fill();  // reads more bytes into in_
  bool Line(std::string_view* line);
  bool Take(char* dst, size_t n);  // the next n bytes, then "\r\n"
  bool ReadValue(char* buf, size_t capacity, size_t* len);

  int fd_ = -1;
  std::string out_;
  std::string in_;
  size_t pos_ = 0;
};

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_MEMCACHED_PEER_H_
