// Blocking socket helpers shared by the manager and the client library: whole
// reads and writes with an optional stall timeout, descriptor passing over Unix
// sockets, and address parsing. Every function reports errors as Status and is
// thread-safe (no shared state).
#ifndef TIERKV_PROTOCOL_SOCKET_IO_H_
#define TIERKV_PROTOCOL_SOCKET_IO_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

// When a thread that busy-polls a socket should not. Busy-polling pays only
// while the polling thread keeps its core between polls. A yield that comes
// back late (after more than kLateYield) means another runnable task held the
// core for a scheduler slice meanwhile. Now and then that is a busy
// neighbour; when such yields cost the thread more than kLostBudget of
// waiting within kWindow (as when a CPU-bound process shares the cores), the
// answer being waited for is better awaited asleep, since a woken thread runs
// ahead of tasks that have been running. The thread then does not spin for a
// quiet period, which doubles each time that happens again within kCalm of
// the previous one's end (kFirstQuiet up to kMaxQuiet), and otherwise starts
// again from kFirstQuiet.
// Not thread-safe: ReadFull and SpinReadable keep one per thread.
class SpinBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kLateYield{500};
  static constexpr std::chrono::microseconds kWindow{100000};
  static constexpr std::chrono::microseconds kLostBudget{12500};
  static constexpr std::chrono::microseconds kFirstQuiet{1000};
  static constexpr std::chrono::microseconds kMaxQuiet{256000};
  static constexpr std::chrono::microseconds kCalm{1000000};

  bool MaySpin(Clock::time_point now) const { return now >= quiet_until_; }
  // Records a yield that returned at `now` after `took`, more than
  // kLateYield; returns the quiet period that starts then (zero: none).
  Clock::duration OnLateYield(Clock::time_point now, Clock::duration took);

 private:
  Clock::time_point window_start_{};
  Clock::duration lost_{0};  // waited in late yields since window_start_
  Clock::time_point quiet_until_{};
  Clock::duration quiet_{0};
};

// The smoothed length of one kind of wait (for a reply, or for a client's next
// request) and how long a waiter busy-polls for the next one: about twice the
// average plus kMarginUs, at most the caller's cap, and not at all while the
// average is at the cap or past it (a wait that long is better slept). Each
// wait moves the average a quarter of the way towards it; one wait counts as
// a second at most, so one long stall is forgotten after a few fast waits.
// Not thread-safe.
class WaitAverage {
 public:
  static constexpr int kMarginUs = 20;
  static constexpr int64_t kLongestUs = 1'000'000;

  // No wait known yet: the first one becomes the average.
  WaitAverage() = default;
  // The average starts at `start_us`; the first wait is averaged in.
  explicit WaitAverage(int start_us) : avg_us_(start_us), known_(true) {}

  void Record(int64_t took_us);
  // Microseconds to poll (0: sleep at once); `unknown_us` (capped) before the
  // first wait of an average without a start.
  int PollUs(int cap_us, int unknown_us = 0) const;
  // The average (0 while unknown).
  int average_us() const { return avg_us_; }

 private:
  int32_t avg_us_ = 0;
  bool known_ = false;
};

// WaitAverages kept apart per request kind (an opcode; those at or above
// kSlots share the last slot), for waits whose length depends on the kind:
// the reply to a lease comes sooner than the reply to a remote fetch, and the
// request after a lease comes only once the client has copied the value,
// the one after a release at once. Not thread-safe.
class WaitsByKind {
 public:
  static constexpr int kSlots = 64;
  WaitAverage& of(uint16_t kind) { return kinds_[Slot(kind)]; }
  const WaitAverage& of(uint16_t kind) const { return kinds_[Slot(kind)]; }

 private:
  static int Slot(uint16_t kind) { return kind < kSlots ? kind : kSlots - 1; }
  std::array<WaitAverage, kSlots> kinds_;
};

// Descriptors a peer passed (SCM_RIGHTS) with the bytes a BufferedReader
// read, oldest first, for the request they came with to take. Holds at most
// kCapacity; one that comes while it is full is closed at once, so a peer
// that sends descriptors nobody asks for cannot make this process hold more.
// Owns what it holds (closed by Take's caller, or by the destructor).
// Not thread-safe.
class FdQueue {
 public:
  static constexpr size_t kCapacity = 2;
  FdQueue() = default;
  ~FdQueue();
  FdQueue(const FdQueue&) = delete;
  FdQueue& operator=(const FdQueue&) = delete;
  // Takes `fd`, or closes it when full.
  void Push(int fd);
  // The oldest descriptor (the caller owns it), or -1 when none came.
  int Take();
  size_t size() const { return n_; }

 private:
  std::array<int, kCapacity> fds_{};
  size_t n_ = 0;
};

// Reads exactly `n` bytes. `timeout_ms` < 0 waits forever; otherwise a stall of
// that long between bytes fails with IO_ERROR. A clean end of stream before the
// first byte is UNAVAILABLE ("connection closed"); in the middle, IO_ERROR.
//
// `spin_us` > 0 first polls the socket without sleeping for up to that many
// microseconds. On virtual machines waking a sleeping thread costs tens of
// microseconds, more than a whole request; a short spin while the peer is
// expected to answer avoids it. The poll yields the core between tries, and
// a yield that comes back late starts a quiet period of the calling thread's
// SpinBackoff (shared with SpinReadable) in which it does not spin.
// With `fds`, descriptors passed with the bytes (a Unix socket) go there;
// without, the kernel drops them.
Status ReadFull(int fd, void* buf, size_t n, int timeout_ms, int spin_us = 0,
                FdQueue* fds = nullptr);

// Reads at least `min` and at most `max` bytes (0 < min <= max) into `buf`,
// whatever more than `min` is already there; *got is the count. Waits, spins
// and fails as ReadFull.
Status ReadSome(int fd, void* buf, size_t min, size_t max, size_t* got, int timeout_ms,
                int spin_us = 0, FdQueue* fds = nullptr);

// Reads a stream socket through a small buffer, so that a frame's header and
// a short body (and often the frame behind them) cost one recv, not two or
// three. A rest of kCapacity bytes or more is read straight into the
// caller's memory. Bytes it has buffered are no longer readable from the
// socket: every read of that socket must go through it, and a wait for the
// next frame must ask `buffered()` (or SpinFill) before it sleeps in poll.
// The buffer (kCapacity) is allocated at the first read that needs it, and
// can be given back while empty (Release).
// Not thread-safe: one per connection.
class BufferedReader {
 public:
  static constexpr size_t kCapacity = 4096;

  BufferedReader();
  ~BufferedReader();
  BufferedReader(const BufferedReader&) = delete;
  BufferedReader& operator=(const BufferedReader&) = delete;

  size_t buffered() const { return end_ - begin_; }
  // Drops what is buffered (the connection was closed or replaced).
  void Clear() { begin_ = end_ = 0; }
  // Frees the buffer when it holds nothing (a connection going idle); the
  // next read that needs one allocates it again.
  void Release() {
    if (buffered() == 0) buf_.reset();
  }
  // Reads exactly `n` bytes, buffered ones first; same waits, timeout and
  // errors as ReadFull (an end of stream after some of a frame's bytes, from
  // the buffer or not, is IO_ERROR).
  Status Read(int fd, void* buf, size_t n, int timeout_ms, int spin_us = 0);
  // SpinReadable through the buffer: true at once when bytes are buffered,
  // else busy-polls by reading into the buffer for up to `spin_us`; true when
  // bytes came, or the socket ended or failed (the next Read reports it).
  bool SpinFill(int fd, int spin_us);
  // From now on, descriptors passed with the bytes read go to `fds` (not
  // owned; outlives the reader), for a request to take (a Unix socket).
  void CollectFds(FdQueue* fds) { fds_ = fds; }

 private:
  uint8_t* Buffer();
  FdQueue* fds_ = nullptr;

  std::unique_ptr<uint8_t[]> buf_;
  size_t begin_ = 0, end_ = 0;
};

// Polls `fd` without sleeping for up to `spin_us` microseconds; true as soon as
// a read would not block (data, end of stream or an error). False at once
// during a quiet period (see ReadFull).
bool SpinReadable(int fd, int spin_us);

// Writes all `n` bytes (MSG_NOSIGNAL); same timeout rule as ReadFull.
Status WriteFull(int fd, const void* buf, size_t n, int timeout_ms);
// Writes `head` then `tail` as one stream, with one sendmsg where the socket
// takes it all (no copy joins them). As WriteFull otherwise.
Status WriteFull2(int fd, std::string_view head, std::string_view tail, int timeout_ms);

// The most descriptors one message carries (the pool and its generation table).
inline constexpr size_t kMaxPassedFds = 2;

// Writes `buf` with `fds` (1..kMaxPassedFds) attached as SCM_RIGHTS ancillary data.
Status WriteWithFds(int fd, const void* buf, size_t n, std::span<const int> fds);

// Reads exactly `n` bytes; the descriptors received with them are stored in
// `received` in order (the rest of it set to -1). The caller owns them, also
// on error; any beyond `received.size()` are closed.
Status ReadWithFds(int fd, void* buf, size_t n, std::span<int> received);
inline Status ReadWithFd(int fd, void* buf, size_t n, int* received_fd) {
  return ReadWithFds(fd, buf, n, std::span<int>(received_fd, 1));
}

// Connects; returns the descriptor (CLOEXEC, TCP_NODELAY for TCP).
Result<int> Connect(const Address& address);

}  // namespace tierkv::proto

#endif  // TIERKV_PROTOCOL_SOCKET_IO_H_
