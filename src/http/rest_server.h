// RestServer: the REST admin API of docs/rest-api.md (all 27
// endpoints), optionally with mutual TLS. The network side is an HttpGate (one
// event loop: slow and idle clients hold no thread); the routes are
// cpp-httplib's router, fed each complete request from memory.
//
// Every business error answers HTTP 200 with
//   {"success": false, "error_message": <real cause>, "timestamp": <ms now>}
// (application/json; charset=utf-8); unknown paths (404), wrong methods (405),
// oversize bodies (413) and URIs (414) get the same body. Handlers never run
// long store work themselves: /memory/evict and /memory/prefetch hand it to a
// background worker and answer at once.
//
// Thread-safety: Start/Stop from one thread; requests are served by the gate's
// worker threads, each handler only reads thread-safe sources.
#ifndef TIERKV_HTTP_REST_SERVER_H_
#define TIERKV_HTTP_REST_SERVER_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/scheduler.h"
#include "events/publisher.h"
#include "http/http_gate.h"
#include "http/metrics_text.h"
#include "http/ports/cluster.h"
#include "http/ports/drain.h"
#include "media/hbm_tier.h"
#include "meta/metadata_store.h"
#include "server/server.h"
#include "store/store.h"
#include "tierkv/status.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace tierkv {

struct RestOptions {
  std::string url = "http://127.0.0.1:8000";  // --metrics-url; port 0 picks one
  bool tls = false;                           // ock.mmc.metrics.tls.enable
  std::string tls_cert;                       // server certificate (PEM)
  std::string tls_key;                        // its private key (PEM)
  std::string tls_ca;                         // CA that client certificates must chain to
  size_t max_body_bytes = 8 << 20;            // larger request bodies get 413
  uint32_t max_connections = 1024;            // HTTP connections open at once
  int request_timeout_ms = 10000;             // a request must arrive within this
  int keepalive_ms = 5000;                    // an idle kept-alive connection closes after
  bool per_rank = false;                      // per-rank series and summary fields
  uint32_t rank = 0;                          // this manager's rank
  uint64_t events_queue_capacity = 0;         // reported when events are off
  bool ssd_configured = false;                // --ssd-dir given
  std::string ssd_error;                      // why that SSD tier did not start ("" if it did)
};

// What the API reads and drives. Pointers are not owned; all but `publisher`
// are required and must outlive the RestServer.
struct RestDeps {
  Store* store = nullptr;
  Server* server = nullptr;                       // client-reported metrics
  events::KvEventPublisher* publisher = nullptr;  // null when events are off
  HaStateProvider* ha = nullptr;
  MetadataStore* metadata = nullptr;
  ClusterIndexView* cluster_index = nullptr;  // null when standalone
  const MetricSource* transfer = nullptr;  // the remote read path's families; null when standalone
  DrainControl* drain = nullptr;           // null when standalone
  Scheduler* scheduler = nullptr;  // runs the evict and prefetch jobs; null: ThreadScheduler()
  const HbmTier* hbm = nullptr;    // the HBM pools; null without --hbm-devices
};

class RestServer {
 public:
  RestServer(RestOptions options, RestDeps deps);
  ~RestServer();

  // Parses the URL, binds and starts serving. Errors: INVALID_ARGUMENT (URL or
  // TLS files), IO_ERROR (bind failed; the message names the address).
  Status Start();
  void Stop();

  // "http://127.0.0.1:8000" with the bound port.
  std::string url() const;

  // The current figures behind /metrics and /metrics/summary.
  MetricsSnapshot Snapshot() const;
  HttpGateStats GateStats() const;

 private:
  class Router;
  void Routes();
  void KeyRoutes();
  void CapacityRoutes();
  void MemoryRoutes();
  void StatusRoutes();
  void ClusterRoutes();
  // Runs `job` on the job queue (evicts and prefetches answered 202 at once).
  void Enqueue(std::function<void()> job);
  std::vector<SegmentInfo> Segments() const;
  // /health's "tiers": each tier's state ("ok", "off", "paused",
  // "unavailable") and, for an SSD tier that did not start, why.
  nlohmann::ordered_json TierHealth() const;

  const RestOptions options_;
  const RestDeps deps_;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> tls_{nullptr, nullptr};
  std::unique_ptr<Router> http_;
  std::unique_ptr<HttpGate> gate_;
  std::string scheme_, host_;
  int port_ = 0;

  std::unique_ptr<WorkQueue> jobs_;  // from Start
};

// The uniform error body.
std::string ErrorBody(const std::string& message, int64_t timestamp_ms);

}  // namespace tierkv

#endif  // TIERKV_HTTP_REST_SERVER_H_
