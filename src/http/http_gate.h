// HttpGate: the network side of the REST admin API.
//
// What it does: owns the listening socket and every HTTP connection in one
// epoll loop (one thread), optionally with TLS (OpenSSL, non-blocking). It
// reads each request completely (head and body) without a thread, then hands
// the whole request to a small pool of workers, which run the routes and build
// the response in memory; the loop writes the response back, again without a
// thread. A slow, trickling or idle client therefore holds a descriptor and a
// buffer, never a worker: scrapes and health probes keep being answered while
// hundreds of such connections are open.
//
// Bounds: a request (head and body) must arrive within request_timeout_ms of
// its first byte (of the accept for the first request), else the connection is
// answered 408 if it sent something, and closed; a keep-alive connection idle
// for keepalive_ms is closed; a response not taken by the client within
// request_timeout_ms is dropped. At most max_connections are open: a new one
// over that sheds the connection idle the longest (or slowest in sending its
// request); when every connection is being served, the new one is closed.
// A request head over 64 KiB gets 431; a chunked request body gets 411 (send
// Content-Length); a body over max_body_bytes is refused by the routes (413)
// without being read. Every request that asked for `Connection: close` (or is
// HTTP/1.0 without keep-alive) is answered with it and then closed.
//
// Thread-safety: Start/Stop from one thread; Stats from any.
#ifndef TIERKV_HTTP_HTTP_GATE_H_
#define TIERKV_HTTP_HTTP_GATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/metric_sink.h"
#include "tierkv/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace tierkv {

struct HttpGateOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks one
  uint32_t max_connections = 1024;
  int request_timeout_ms = 10000;
  int keepalive_ms = 5000;
  uint32_t workers = 4;
  size_t max_body_bytes = 8 << 20;
  SSL_CTX* tls = nullptr;  // not owned; null: plain HTTP
  // Body of the gate's own error answers (408, 411, 431, 400) from a message.
  std::function<std::string(const std::string&)> error_body;
};

struct HttpGateStats {
  uint64_t connections = 0;  // open now
  uint64_t accepted = 0;
  uint64_t shed = 0;              // closed to make room for a new one
  uint64_t refused = 0;           // closed at once: every connection was being served
  uint64_t request_timeouts = 0;  // requests (or responses) that missed request_timeout_ms
  uint64_t requests = 0;
};

// One complete request as read from the wire, and where its answer goes.
struct HttpExchange {
  std::string_view request;  // head and body (the body may be left out: see above)
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
  bool close = false;    // the connection closes after this answer
  std::string response;  // filled by the handler: the whole HTTP response
  bool closed_by_handler = false;
};

class HttpGate {
 public:
  // `handler` runs on a worker for each complete request; it fills
  // exchange.response and may set exchange.closed_by_handler.
  using Handler = std::function<void(HttpExchange& exchange)>;
  HttpGate(HttpGateOptions options, Handler handler);
  ~HttpGate();

  // Binds and starts. Errors: IO_ERROR naming the address.
  Status Start();
  // Stops accepting, lets the workers finish, closes every connection. Idempotent.
  void Stop();
  int port() const { return port_; }
  HttpGateStats Stats() const;
  // Reports the tierkv_http_* families of `stats` (a gate's, or zeros
  // before one runs).
  static void ReportMetrics(const HttpGateStats& stats, MetricSink& sink);

 private:
  struct Conn;
  struct Job {
    uint64_t id;
    Conn* conn;
  };
  void Loop();
  void Accept();
  void OnEvent(Conn* c, uint32_t events);
  void Handshake(Conn* c);
  void ReadSome(Conn* c);
  void Parse(Conn* c);
  void Flush(Conn* c);
  void Discard(Conn* c);
  void Answer(Conn* c, int status, const std::string& message);
  void Want(Conn* c, uint32_t events);
  void Drop(Conn* c);
  bool ShedOne();
  void Sweep(int64_t now_ns);
  void Completed();
  void WorkerLoop();

  const HttpGateOptions options_;
  const Handler handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread loop_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  // Owned by the loop thread.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;

  // Loop -> workers, and the answers back.
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  std::vector<Job> done_;

  std::atomic<uint64_t> open_{0}, accepted_{0}, shed_{0}, refused_{0}, timeouts_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace tierkv

#endif  // TIERKV_HTTP_HTTP_GATE_H_
