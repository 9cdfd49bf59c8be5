// Session: one client connection's request loop.
//
// Waits for a request as its RequestPacer plans, reads the frame, checks it
// against the limits before allocating anything, has its RequestHandler run
// it, and writes the reply (with the pool's descriptors after HELLO on a Unix
// socket). A body that does not decode gets a PROTOCOL_ERROR reply and the
// connection stays open (framing is intact); a header that cannot be trusted
// (bad magic or version, a length over the limit) gets a kFatal frame and the
// connection is closed. Nothing a client sends affects other sessions.
//
// The handler remembers the write grants, read leases and pins the session
// was given; when the connection ends (for any reason) they are aborted and
// released, so a client that vanishes mid-put or mid-get leaks nothing.
//
// The first request must be HELLO, answered before `handshake_deadline_ns`
// (CLOCK_MONOTONIC); otherwise the connection ends.
//
// Thread-safety: a Session is driven by one thread at a time (the worker that
// serves its connection now).
#ifndef TIERKV_SERVER_SESSION_H_
#define TIERKV_SERVER_SESSION_H_

#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "protocol/frame.h"
#include "protocol/socket_io.h"
#include "server/request_handler.h"
#include "server/request_pacer.h"
#include "server/server.h"
#include "store/store.h"

namespace tierkv {

class Session {
 public:
  Session(Server* server, Store* store, int fd, bool unix_socket, uint64_t id,
          int64_t handshake_deadline_ns = INT64_MAX);

  // Serves requests while they come. Returns true when no request came for
  // `park_ms` (< 0: never) after the handshake: the connection is idle and may
  // be parked; false when it ended (peer closed, stream broken, read side shut
  // down, handshake deadline passed).
  bool Serve(int park_ms);
  // Serve until the connection ends.
  void Run();
  bool hello_done() const { return handler_.hello_done(); }
  // Whether the client holds pinned values (views into the pool): such a
  // connection is never closed to make room for another.
  bool holds_pins() const { return handler_.holds_pins(); }

 private:
  // Waits up to `ms` (< 0: forever) for the next request; false when none came
  // or the server needs this worker for a waiting connection.
  bool WaitForRequest(int ms);
  // Sleeps until spin_us / 2 before a request due in about `gap_us`, then
  // polls for up to spin_us (RequestPacer). How it came (kSlept: before the
  // sleep ended, or the socket ended); nullopt leaves the ordinary wait to
  // follow.
  std::optional<RequestWait> AwaitPaced(int gap_us, int spin_us);
  // Reads the next request into body_; its header in `*h`. False when the
  // connection ends (a fatal frame was sent where the stream is unusable).
  bool ReadRequest(int io_timeout_ms, proto::FrameHeader* h);
  Status SendReply(const proto::FrameHeader& request, const Status& status);
  void SendFatal(const Status& status);

  Server* const server_;
  Store* const store_;
  const int fd_;
  const bool unix_socket_;
  const int64_t handshake_deadline_ns_;
  const Clock* const clock_;
  RequestHandler handler_;
  RequestPacer pacer_;
  proto::FdQueue fds_;            // descriptors the client passed, for REGISTER
  proto::BufferedReader reader_;  // every read of fd_ goes through it
  std::string body_;              // request body buffer, reused
  std::string reply_;             // reply frame buffer, reused
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_SESSION_H_
