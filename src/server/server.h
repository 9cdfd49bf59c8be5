// Server: the client-facing listeners of a manager.
//
// Accepts connections on a Unix socket (same host: the DRAM pool's memfd is
// passed at handshake, so bytes move by one memcpy in the client) and on TCP
// (bytes inline in frames).
//
// Threads: one poller thread owns every connection that is not being served
// right now (new ones, and idle ones), in one epoll set, and wakes when one of
// them becomes readable. A readable connection is handed to a worker thread,
// which runs its Session while requests keep coming: the adaptive busy-poll
// fast path for tight request loops, then a short wait for the next request
// (about twice the client's usual gap, 20 ms to idle_park_ms), then the
// connection is parked back in the poller and the worker serves someone
// else. Idle connections therefore cost a descriptor and a little memory, not a
// thread. Workers are started on demand, at most max_connections at once (the
// sessions actually working), and end after a few seconds without work.
//
// Limits: a connection must complete its HELLO within handshake_timeout_ms of
// being accepted, or it is closed (counted). At most max_open_connections are
// open; a new connection over that first sheds the oldest connection still in
// its handshake, else the session idle the longest; when every connection is
// working it is refused with UNAVAILABLE.
//
// Shutdown (Stop): listeners close first (no new connections), parked
// connections are closed, then every working session's read side is shut down,
// so each finishes the request it is executing, answers it, and ends; Stop
// returns when all sessions are gone.
//
// Thread-safety: Start and Stop from one thread; the accessors from any.
#ifndef TIERKV_SERVER_SERVER_H_
#define TIERKV_SERVER_SERVER_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/metric_sink.h"
#include "server/client_metrics.h"
#include "server/registered_memory.h"
#include "server/remote_catalog.h"
#include "store/store.h"
#include "tierkv/status.h"

namespace tierkv {

struct ServerOptions {
  std::string uds_path;                   // empty: no Unix socket
  uint32_t uds_mode = 0660;               // permission bits of the socket file
  std::string tcp_listen;                 // "HOST:PORT"; empty: no TCP; port 0 picks one
  uint32_t rank = 0;                      // this manager's rank
  uint32_t max_frame_bytes = 64u << 20;   // largest request body accepted
  uint32_t max_batch = 4096;              // most items in one batch call
  uint32_t max_connections = 1024;        // most sessions served at once (worker threads)
  uint32_t max_open_connections = 16384;  // most connections open, working or idle
  int handshake_timeout_ms = 5000;        // HELLO must be answered within this of accept
  int io_timeout_ms = 30000;              // a peer stalled mid-frame (either way) is dropped
  int spin_us = 400;  // most a busy client's connection is polled before sleeping
  int idle_park_ms =
      200;  // most a worker waits for the next request (2 x the client's gap), then parks
  uint32_t max_metric_ranks = 1024;          // client ranks whose reported metrics are kept at once
  uint64_t max_pinned_bytes = 256ull << 20;  // held by one connection's PINs (0: PIN refused)
  // Client memory registered for gets to write into (REGISTER): all
  // connections together (0: REGISTER refused), one connection, and the
  // regions one connection may hold.
  uint64_t max_registered_bytes = 4ull << 30;
  uint64_t max_registered_bytes_per_client = 1ull << 30;
  uint32_t max_registered_regions_per_client = 16;
};

// How a session came by a client's next request: it was busy-polling for it
// (or had read it already), it was awaiting it paced (asleep until shortly
// before a regular client's request was due, then polling), or it was asleep.
enum class RequestWait { kPolled = 0, kPaced = 1, kSlept = 2 };
inline constexpr int kRequestWaitKinds = 3;

struct ServerStats {
  uint64_t connections_current = 0;  // open now, working or idle
  uint64_t connections_working = 0;  // being served by a worker now
  uint64_t connections_total = 0;
  uint64_t connections_refused = 0;  // over max_open_connections with nobody to shed
  uint64_t connections_shed = 0;     // closed to make room for a new one
  uint64_t handshake_timeouts = 0;   // closed for not completing HELLO in time
  uint64_t protocol_errors = 0;      // connections closed for an unusable byte stream
  uint64_t requests = 0;             // the sum of request_waits
  std::array<uint64_t, kRequestWaitKinds> request_waits{};  // by RequestWait
  uint64_t worker_threads = 0;                              // started now
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
  // address), IO_ERROR (bind/listen/epoll failed: the message names the address).
  Status Start();
  // Graceful stop as described above. Idempotent.
  void Stop();

  // Where clients connect: "unix:/path" / "tcp://127.0.0.1:7600" (the bound port
  // when 0 was asked for); empty when that listener is off.
  std::string uds_address() const;
  std::string tcp_address() const;

  ServerStats Stats() const;
  // Reports the tierkv_server_* and tierkv_client_metric_* families
  // (server_metrics.cc). Thread-safe.
  void ReportMetrics(MetricSink& sink) const;
  const ServerOptions& options() const { return options_; }
  // Cluster mode: where lookups that miss locally look next (set before
  // Start; must outlive the server). Null: local only.
  void SetCatalog(const RemoteCatalog* catalog) { catalog_ = catalog; }
  const RemoteCatalog* catalog() const { return catalog_; }

  // What clients reported about their transfers (for /metrics).
  ClientMetrics& client_metrics() { return client_metrics_; }
  RegisteredMemory& registered() { return registered_; }
  const ClientMetrics& client_metrics() const { return client_metrics_; }

  // Used by sessions.
  // One request, by how its session awaited it (the total is their sum).
  void CountRequest(RequestWait how) {
    request_waits_[static_cast<int>(how)].fetch_add(1, std::memory_order_relaxed);
  }
  void CountProtocolError() { protocol_errors_.fetch_add(1, std::memory_order_relaxed); }
  void CountHandshakeTimeout() { handshake_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  // True while readable connections wait for a worker (all are busy).
  bool Saturated() const { return backlog_.load(std::memory_order_relaxed) > 0; }

 private:
  struct Conn;
  Status ListenUnix();
  Status ListenTcp();
  void PollLoop();
  void Accept(int listen_fd, bool unix_socket);
  // Closes one parked connection to make room; false when every one is working.
  bool ShedOneLocked(std::unique_ptr<Conn>* victim);  // conns_mu_ held
  void CloseExpiredHandshakes(int64_t now_ns);
  void Ready(Conn* conn);  // conns_mu_ not held
  void Park(Conn* conn);
  void Close(Conn* conn);
  void WorkerLoop();

  const ServerOptions options_;
  const RemoteCatalog* catalog_ = nullptr;
  Store* const store_;
  int uds_fd_ = -1;
  int tcp_fd_ = -1;
  uint16_t tcp_port_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that wakes the poller on Stop
  std::thread poller_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  // Every open connection by id; a Conn is touched by the poller only while it
  // is parked (!working) and by one worker only while it is working.
  mutable std::mutex conns_mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::deque<std::pair<int64_t, uint64_t>> handshakes_;  // (deadline, id), accept order
  uint64_t working_ = 0;
  std::condition_variable drained_cv_;  // conns_ became empty (Stop)

  // Worker pool.
  mutable std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  std::deque<Conn*> ready_;
  std::atomic<size_t> backlog_{0};  // ready_.size()
  uint32_t workers_ = 0;            // started and not yet ended
  uint32_t idle_workers_ = 0;       // waiting for work
  std::condition_variable workers_done_cv_;

  std::atomic<uint64_t> next_session_{1};
  std::atomic<uint64_t> connections_total_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> connections_shed_{0};
  std::atomic<uint64_t> handshake_timeouts_{0};
  std::atomic<uint64_t> protocol_errors_{0};
  std::array<std::atomic<uint64_t>, kRequestWaitKinds> request_waits_{};
  ClientMetrics client_metrics_;
  RegisteredMemory registered_;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_SERVER_H_
