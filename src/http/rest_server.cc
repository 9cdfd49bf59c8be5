#include "http/rest_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "http/http_gate.h"
#include "http/rest_router.h"

namespace tierkv {

std::string ErrorBody(const std::string& message, int64_t timestamp_ms) {
  nlohmann::ordered_json j;
  j["success"] = false;
  j["error_message"] = message;
  j["timestamp"] = timestamp_ms;
  return j.dump();
}

namespace {

// Parses "http://HOST:PORT" / "https://HOST:PORT" ("[::1]" for IPv6 hosts).
Status ParseUrl(const std::string& url, std::string* scheme, std::string* host, int* port) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) {
    return InvalidArgument("--metrics-url '" + url + "' must look like http://HOST:PORT");
  }
  *scheme = url.substr(0, sep);
  if (*scheme != "http" && *scheme != "https") {
    return InvalidArgument("--metrics-url '" + url + "': scheme must be http or https");
  }
  std::string rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 == rest.size()) {
    return InvalidArgument("--metrics-url '" + url + "' needs a port");
  }
  *host = rest.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (host->empty()) return InvalidArgument("--metrics-url '" + url + "' needs a host");
  try {
    size_t used = 0;
    *port = std::stoi(rest.substr(colon + 1), &used);
    if (used != rest.size() - colon - 1 || *port < 0 || *port > 65535) throw std::out_of_range("");
  } catch (const std::exception&) {
    return InvalidArgument("--metrics-url '" + url + "' has an invalid port");
  }
  return Status::Ok();
}

// The request bytes the gate read, and the response built in memory.
class ExchangeStream : public httplib::Stream {
 public:
  explicit ExchangeStream(HttpExchange& ex) : ex_(ex) {}
  bool is_readable() const override { return pos_ < ex_.request.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, ex_.request.size() - pos_);
    std::memcpy(ptr, ex_.request.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    ex_.response.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = ex_.remote_ip;
    port = ex_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = ex_.local_ip;
    port = ex_.local_port;
  }
  socket_t socket() const override { return -1; }

 private:
  HttpExchange& ex_;
  size_t pos_ = 0;
};

}  // namespace

void RestServer::Router::Handle(HttpExchange& ex) {
  ExchangeStream stream(ex);
  bool closed = false;
  // The gate already answered (or made unnecessary) any 100 Continue.
  const bool ok = process_request(stream, ex.close, closed,
                                  [](httplib::Request& req) { req.headers.erase("Expect"); });
  ex.closed_by_handler = closed || !ok;
}

namespace {

void FreeTls(SSL_CTX* ctx) { SSL_CTX_free(ctx); }

// A server context from PEM files; with a CA, client certificates are required.
Result<SSL_CTX*> MakeTls(const RestOptions& o) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InvalidArgument("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  bool ok = SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert.c_str()) == 1 &&
            SSL_CTX_use_PrivateKey_file(ctx, o.tls_key.c_str(), SSL_FILETYPE_PEM) == 1 &&
            SSL_CTX_check_private_key(ctx) == 1;
  if (ok && !o.tls_ca.empty()) {
    ok = SSL_CTX_load_verify_locations(ctx, o.tls_ca.c_str(), nullptr) == 1;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  ERR_clear_error();
  if (!ok) {
    SSL_CTX_free(ctx);
    return InvalidArgument("cannot load the TLS certificate, key or CA (" + o.tls_cert + ", " +
                           o.tls_key + ", " + o.tls_ca + ")");
  }
  return ctx;
}

}  // namespace

RestServer::RestServer(RestOptions options, RestDeps deps)
    : options_(std::move(options)), deps_(deps) {}

RestServer::~RestServer() { Stop(); }

Status RestServer::Start() {
  if (Status st = ParseUrl(options_.url, &scheme_, &host_, &port_); !st.ok()) return st;
  HttpGateOptions g;
  if (options_.tls || scheme_ == "https") {
    if (options_.tls_cert.empty() || options_.tls_key.empty()) {
      return InvalidArgument(
          "TLS needs ock.mmc.metrics.tls.cert_path and ock.mmc.metrics.tls.key_path");
    }
    Result<SSL_CTX*> ctx = MakeTls(options_);
    if (!ctx.ok()) return ctx.status();
    tls_ = std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)>(*ctx, FreeTls);
    g.tls = tls_.get();
    scheme_ = "https";
  }
  http_ = std::make_unique<Router>();
  http_->set_payload_max_length(options_.max_body_bytes);
  Routes();
  g.host = host_;
  g.port = port_;
  g.max_connections = options_.max_connections;
  g.request_timeout_ms = options_.request_timeout_ms;
  g.keepalive_ms = options_.keepalive_ms;
  g.max_body_bytes = options_.max_body_bytes;
  g.error_body = [clock = deps_.store->clock()](const std::string& m) {
    return ErrorBody(m, clock->NowUnixMillis());
  };
  Scheduler* scheduler = deps_.scheduler ? deps_.scheduler : ThreadScheduler();
  jobs_ = scheduler->Queue({});  // before the first request can queue a job
  gate_ = std::make_unique<HttpGate>(std::move(g), [this](HttpExchange& ex) { http_->Handle(ex); });
  if (Status st = gate_->Start(); !st.ok()) {
    return Status(Code::kIoError, "--metrics-url " + options_.url + ": " + st.message());
  }
  port_ = gate_->port();
  return Status::Ok();
}

void RestServer::Stop() {
  if (gate_) gate_->Stop();
  if (jobs_) {  // no request can queue one any more: the accepted ones finish
    jobs_->WaitIdle();
    jobs_->Stop();
  }
}

HttpGateStats RestServer::GateStats() const { return gate_ ? gate_->Stats() : HttpGateStats{}; }

std::string RestServer::url() const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return scheme_ + "://" + host + ":" + std::to_string(port_);
}

void RestServer::Enqueue(std::function<void()> job) { (void)jobs_->Post(std::move(job)); }

std::vector<SegmentInfo> RestServer::Segments() const {
  const AllocatorStats dram = deps_.store->pool().Stats();
  const std::string prefix = "rank-" + std::to_string(options_.rank);
  std::vector<SegmentInfo> out;
  if (deps_.hbm != nullptr) {  // one segment for the pools of every GPU
    out.push_back(
        SegmentInfo{prefix + "-hbm", Medium::kHbm, deps_.hbm->capacity(), deps_.hbm->allocated()});
  }
  out.push_back(SegmentInfo{prefix + "-dram", Medium::kDram, dram.capacity, dram.allocated});
  if (deps_.store->has_ssd()) {
    const AllocatorStats ssd = deps_.store->admin().Stats().tier.ssd;
    out.push_back(SegmentInfo{prefix + "-ssd", Medium::kSsd, ssd.capacity, ssd.allocated});
  }
  return out;
}

nlohmann::ordered_json RestServer::TierHealth() const {
  nlohmann::ordered_json t = nlohmann::ordered_json::object();
  t["dram"] = "ok";
  if (!options_.ssd_configured) {
    t["ssd"] = "off";
  } else if (!deps_.store->has_ssd()) {
    t["ssd"] = "unavailable";
    t["ssd_error"] = options_.ssd_error;
  } else {
    t["ssd"] = deps_.store->admin().Stats().tier.writes_paused ? "paused" : "ok";
  }
  return t;
}

MetricsSnapshot RestServer::Snapshot() const {
  MetricsSnapshot s;
  s.rank = options_.rank;
  s.per_rank = options_.per_rank;
  s.segments = Segments();
  for (const SegmentInfo& seg : s.segments) {
    s.medium_total[static_cast<int>(seg.medium)] += seg.total_bytes;
    s.medium_used[static_cast<int>(seg.medium)] += seg.used_bytes;
  }
  s.ops = &deps_.store->admin().op_stats();
  for (uint32_t r = 0; r < OpStats::kMaxRanks; ++r) {
    if (s.ops->RankSeen(r)) s.ranks.push_back(r);
  }
  s.store = deps_.store->admin().Stats();
  s.ssd_configured = options_.ssd_configured;
  s.ssd_error = options_.ssd_error;
  const TierStats& t = s.store.tier;
  s.tiers = TierCounters{t.flush_blobs,  t.flush_bytes,          t.rewarm,      t.rewarm_failed,
                         t.rewarm_bytes, t.rewarm_bytes_current, t.get_hits_ssd};
  s.events_enabled = deps_.publisher != nullptr;
  if (deps_.publisher != nullptr) s.events = deps_.publisher->Stats();
  s.events_queue_capacity =
      deps_.publisher != nullptr ? s.events.queue_capacity : options_.events_queue_capacity;
  s.clients = deps_.server->client_metrics().Snapshot(deps_.store->clock()->NowUnixMillis());
  if (deps_.hbm != nullptr) {
    s.components.push_back([this](MetricSink& sink) { deps_.hbm->ReportMetrics(sink); });
  }
  s.components.push_back([this](MetricSink& sink) { deps_.server->ReportMetrics(sink); });
  s.components.push_back([this](MetricSink& sink) { HttpGate::ReportMetrics(GateStats(), sink); });
  if (deps_.cluster_index != nullptr) {  // cluster mode
    s.components.push_back([this](MetricSink& sink) {
      deps_.ha->ReportMetrics(sink);
      deps_.cluster_index->ReportMetrics(sink);
      if (deps_.transfer != nullptr) deps_.transfer->ReportMetrics(sink);
      if (deps_.drain != nullptr) deps_.drain->ReportMetrics(sink);
    });
  }
  return s;
}

}  // namespace tierkv
