// DataServer: the owner's data channel listener (--data-addr).
//
// Serves READ requests (data_frame.h) against a GrantSource: each request is
// checked against its grant (ticket, item, generation, byte range), then the
// bytes are written to the socket straight from the pinned pool memory, with
// their xxh3-64 after them. Nothing is copied on this side. AUTHORIZE
// requests are decided by the GrantSource: on the connection's event loop
// when it can decide at once (GrantSource::TryAuthorize), else on a pool of
// two threads of their own, since such a decision may block.
//
// asio, one io_context per thread (`threads` of them); each connection is a
// coroutine on one of them, given round robin at accept, that serves its
// requests one after another. A connection idle for
// idle_timeout_ms, or a write that does not finish within io_timeout_ms plus
// one second per 64 MiB, is closed (the grant's hold is dropped with it). At
// most max_connections are open: a new one over that first sheds the oldest
// connection still waiting for its first request, else the one idle the
// longest (a requester reconnects at its next request); when every
// connection is answering a request for 100 ms, the new one is closed. Both
// are counted. An AUTHORIZE's bytes are taken as they come, so a peer holds
// only the memory of what it has sent.
//
// With TLS (options.tls) a connection must complete a TLS handshake with a
// certificate signed by the CA within io_timeout_ms, or it is closed (counted
// as refused).
//
// Thread-safety: Start/Stop from one thread; Stats from any.
#ifndef TIERKV_TRANSFER_DATA_SERVER_H_
#define TIERKV_TRANSFER_DATA_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/metric_sink.h"
#include "tierkv/status.h"
#include "transfer/tls.h"
#include "transfer/transport.h"

namespace tierkv::transfer {

struct DataServerOptions {
  std::string listen;  // HOST:PORT; port 0 picks one
  int threads = 2;
  size_t max_connections = 256;
  int64_t idle_timeout_ms = 300000;
  int64_t io_timeout_ms = 10000;
  TlsFiles tls;  // enabled: every connection is TLS with a certificate the CA signed
  // Fault injection (tests): called once per READ answered with bytes; true
  // sends that answer with a wrong checksum in its trailer (the bytes and
  // the checksums kept are untouched). Null: never.
  std::function<bool()> corrupt_read;
};

struct DataServerStats {
  uint64_t connections = 0;        // open now
  uint64_t connections_total = 0;  // accepted
  uint64_t refused = 0;            // closed: every connection kept answering, or TLS failed
  uint64_t shed = 0;               // idle ones closed to make room for a new one
  uint64_t reads = 0;              // READs answered with bytes (counted as the answer starts)
  uint64_t refusals = 0;           // READs answered with an error
  uint64_t bytes_out = 0;          // object bytes of those answers
  uint64_t checksums_reused = 0;   // answers that sent the value's known checksum unhashed
  uint64_t authorizations = 0;     // AUTHORIZEs answered (refusals of the whole call not counted)
  uint64_t decided_at_once = 0;    // AUTHORIZEs decided on an event loop (no wait was needed)
  uint64_t decided_on_pool = 0;    // ... on the blocking pool
};

class DataServer {
 public:
  // `source` is not owned and must outlive the server.
  DataServer(DataServerOptions options, GrantSource* source);
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // Binds and starts serving. Errors: INVALID_ARGUMENT (bad address, TLS
  // files that cannot be loaded),
  // UNAVAILABLE (cannot bind; the message names the address).
  Status Start();
  // Closes the listener and every connection, and joins the threads. Idempotent.
  void Stop();
  int port() const;
  DataServerStats Stats() const;
  // Reports the tierkv_data_* families (data_server_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;

 private:
  struct Impl;
  struct Slot;
  struct SlotHolder;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_DATA_SERVER_H_
