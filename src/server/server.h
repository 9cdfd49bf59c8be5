// Server: the client-facing listeners of a manager.
//
// Accepts connections on a Unix socket (same host: the DRAM pool's memfd is
// passed at handshake, so bytes move by one memcpy in the client) and on TCP
// (bytes inline in frames). Each connection is served by its own thread running
// a Session: frames are read, decoded, executed against the Store and answered
// in order. Engines keep a few long-lived connections, so a thread per
// connection costs little and keeps each request's path short; the number of
// connections is capped (max_connections).
//
// Shutdown (Stop): listeners close first (no new connections), then every
// session's read side is shut down, so each finishes the request it is
// executing, answers it, and ends; Stop returns when all sessions are gone.
//
// Thread-safety: Start and Stop from one thread; the accessors from any.
#ifndef TIERKV_SERVER_SERVER_H_
#define TIERKV_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/client_metrics.h"
#include "store/store.h"
#include "tierkv/status.h"

namespace tierkv {

struct ServerOptions {
  std::string uds_path;                  // empty: no Unix socket
  uint32_t uds_mode = 0660;              // permission bits of the socket file
  std::string tcp_listen;                // "HOST:PORT"; empty: no TCP; port 0 picks one
  uint32_t rank = 0;                     // this manager's rank
  uint32_t max_frame_bytes = 64u << 20;  // largest request body accepted
  uint32_t max_batch = 4096;             // most items in one batch call
  uint32_t max_connections = 1024;
  int io_timeout_ms = 30000;  // a peer stalled mid-frame (either way) is dropped
  int spin_us = 400;          // most a busy client's connection is polled before sleeping
};

struct ServerStats {
  uint64_t connections_current = 0;
  uint64_t connections_total = 0;
  uint64_t connections_refused = 0;
  uint64_t protocol_errors = 0;  // connections closed for an unusable byte stream
  uint64_t requests = 0;
};

class Session;

class Server {
 public:
  // `store` is not owned and must outlive the server.
  Server(const ServerOptions& options, Store* store);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listeners and starts accepting. Errors: INVALID_ARGUMENT (bad
  // address), IO_ERROR (bind/listen failed: the message names the address).
  Status Start();
  // Graceful stop as described above. Idempotent.
  void Stop();

  // Where clients connect: "unix:/path" / "tcp://127.0.0.1:7600" (the bound port
  // when 0 was asked for); empty when that listener is off.
  std::string uds_address() const;
  std::string tcp_address() const;

  ServerStats Stats() const;
  const ServerOptions& options() const { return options_; }

  // What clients reported about their transfers (for /metrics).
  ClientMetrics& client_metrics() { return client_metrics_; }

  // Used by sessions.
  void CountRequest() { requests_.fetch_add(1, std::memory_order_relaxed); }
  void CountProtocolError() { protocol_errors_.fetch_add(1, std::memory_order_relaxed); }

 private:
  struct Conn {
    int fd;
    bool unix_socket;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  Status ListenUnix();
  Status ListenTcp();
  void AcceptLoop(int listen_fd, bool unix_socket);
  void ReapFinished();  // conns_mu_ held

  const ServerOptions options_;
  Store* const store_;
  int uds_fd_ = -1;
  int tcp_fd_ = -1;
  uint16_t tcp_port_ = 0;
  int wake_fd_ = -1;  // eventfd that wakes the accept loops on Stop
  std::vector<std::thread> acceptors_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  mutable std::mutex conns_mu_;
  std::list<std::unique_ptr<Conn>> conns_;
  std::atomic<uint64_t> next_session_{1};
  std::atomic<uint64_t> connections_total_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> protocol_errors_{0};
  std::atomic<uint64_t> requests_{0};
  ClientMetrics client_metrics_;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_SERVER_H_
