// Blocking socket helpers shared by the manager and the client library: whole
// reads and writes with an optional stall timeout, descriptor passing over Unix
// sockets, and address parsing. Every function reports errors as Status and is
// thread-safe (no shared state).
#ifndef TIERKV_PROTOCOL_SOCKET_IO_H_
#define TIERKV_PROTOCOL_SOCKET_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv::proto {

struct Address {
  enum class Kind { kUnix, kTcp } kind = Kind::kUnix;
  std::string path;  // kUnix
  std::string host;  // kTcp
  uint16_t port = 0;
  std::string ToString() const;  // "unix:/run/tierkv.sock", "tcp://127.0.0.1:7600"
};

// Accepts "unix:PATH", "unix://PATH", a path containing '/', "tcp://HOST:PORT" or
// "HOST:PORT" ("[::1]:7600" for IPv6). INVALID_ARGUMENT otherwise.
Result<Address> ParseAddress(std::string_view text);

// Reads exactly `n` bytes. `timeout_ms` < 0 waits forever; otherwise a stall of
// that long between bytes fails with IO_ERROR. A clean end of stream before the
// first byte is UNAVAILABLE ("connection closed"); in the middle, IO_ERROR.
//
// `spin_us` > 0 first polls the socket without sleeping for up to that many
// microseconds. On virtual machines waking a sleeping thread costs tens of
// microseconds, more than a whole request; a short spin while the peer is
// expected to answer avoids it.
Status ReadFull(int fd, void* buf, size_t n, int timeout_ms, int spin_us = 0);

// Polls `fd` without sleeping for up to `spin_us` microseconds; true as soon as
// a read would not block (data, end of stream or an error).
bool SpinReadable(int fd, int spin_us);

// Writes all `n` bytes (MSG_NOSIGNAL); same timeout rule as ReadFull.
Status WriteFull(int fd, const void* buf, size_t n, int timeout_ms);

// Writes `buf` with `fd_to_send` attached as SCM_RIGHTS ancillary data.
Status WriteWithFd(int fd, const void* buf, size_t n, int fd_to_send);

// Reads exactly `n` bytes; a descriptor received with them is stored in
// *received_fd (else -1).
Status ReadWithFd(int fd, void* buf, size_t n, int* received_fd);

// Connects; returns the descriptor (CLOEXEC, TCP_NODELAY for TCP).
Result<int> Connect(const Address& address);

}  // namespace tierkv::proto

#endif  // TIERKV_PROTOCOL_SOCKET_IO_H_
