// PeerGate: the bounded front of the peer gRPC listener (--addr).
//
// What it does: gRPC (1.51, the Debian package) accepts every connection
// that reaches its port and keeps each until the peer closes it, so idle
// connections could exhaust the manager's descriptors and memory. The gate
// owns the public port instead: it accepts, bounds and times out the
// connections, and relays each one's bytes, both ways and unchanged, to the
// gRPC server listening on a loopback port of its own. TLS passes through
// untouched: the handshake is still between the peer and gRPC. The gRPC
// server is dialled only once a peer has sent its first byte, so a silent
// connection never reaches it.
//
// Bounds: at most max_connections are open; a new one over that sheds the
// connection that has not sent its first byte for the longest, else the one
// idle the longest (counted). A connection must send its first byte within
// handshake_timeout_ms of the accept, and one that moves no byte either way
// for idle_timeout_ms is closed (both counted; gRPC reconnects a channel it
// still needs). An idle connection holds two sockets and no buffer: bytes are
// read only when the other side can take them, through one buffer per gate,
// and a remainder the other side could not take yet is kept per connection
// until it is written.
//
// One thread (an asio io_context). Thread-safety: Start/Stop from one
// thread; Stats and port from any.
#ifndef TIERKV_CLUSTER_PEER_GATE_H_
#define TIERKV_CLUSTER_PEER_GATE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/metric_sink.h"
#include "tierkv/status.h"

namespace tierkv {

struct PeerGateOptions {
  std::string listen;   // HOST:PORT; port 0 picks one
  std::string backend;  // where the gRPC server listens (HOST:PORT)
  size_t max_connections = 1024;
  int64_t handshake_timeout_ms = 5000;  // the first byte must come within this
  int64_t idle_timeout_ms = 300000;     // no byte either way this long: closed
};

struct PeerGateStats {
  uint64_t connections = 0;         // open now
  uint64_t accepted = 0;            // since start
  uint64_t shed = 0;                // closed to make room for a new one
  uint64_t handshake_timeouts = 0;  // closed for sending nothing in time
  uint64_t idle_closed = 0;         // closed after idle_timeout_ms without a byte
  uint64_t backend_failures = 0;    // closed because the gRPC server could not be reached
};

class PeerGate {
 public:
  explicit PeerGate(PeerGateOptions options);
  ~PeerGate();  // Stop()
  PeerGate(const PeerGate&) = delete;
  PeerGate& operator=(const PeerGate&) = delete;

  // Binds and starts relaying. UNAVAILABLE naming the address when it cannot
  // be bound; INVALID_ARGUMENT for an address that does not parse.
  Status Start();
  // Closes every connection and the listener; joins the thread.
  void Stop();
  int port() const;
  PeerGateStats Stats() const;
  // Reports the tierkv_peer_* families of `stats` (a gate's, or zeros
  // before one runs; cluster_metrics.cc).
  static void ReportMetrics(const PeerGateStats& stats, MetricSink& sink);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_GATE_H_
