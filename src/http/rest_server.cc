#include "http/rest_server.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

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

}  // namespace

RestServer::RestServer(RestOptions options, RestDeps deps)
    : options_(std::move(options)), deps_(deps) {}

RestServer::~RestServer() { Stop(); }

Status RestServer::Start() {
  if (Status st = ParseUrl(options_.url, &scheme_, &host_, &port_); !st.ok()) return st;
  if (options_.tls || scheme_ == "https") {
    if (options_.tls_cert.empty() || options_.tls_key.empty()) {
      return InvalidArgument(
          "TLS needs ock.mmc.metrics.tls.cert_path and ock.mmc.metrics.tls.key_path");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(
        options_.tls_cert.c_str(), options_.tls_key.c_str(),
        options_.tls_ca.empty() ? nullptr : options_.tls_ca.c_str());
    if (!ssl->is_valid()) {
      return InvalidArgument("cannot load the TLS certificate, key or CA (" + options_.tls_cert +
                             ", " + options_.tls_key + ", " + options_.tls_ca + ")");
    }
    http_ = std::move(ssl);
    scheme_ = "https";
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  http_->set_tcp_nodelay(true);
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(10, 0);
  http_->set_write_timeout(10, 0);
  Routes();
  if (port_ == 0) {
    port_ = http_->bind_to_any_port(host_);
    if (port_ < 0) return Status(Code::kIoError, "--metrics-url " + options_.url + ": bind failed");
  } else if (!http_->bind_to_port(host_, port_)) {
    return Status(Code::kIoError,
                  "--metrics-url " + options_.url + ": bind failed (address in use or not local)");
  }
  worker_ = std::thread([this] { WorkerLoop(); });
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  return Status::Ok();
}

void RestServer::Stop() {
  if (http_) http_->stop();
  if (listener_.joinable()) listener_.join();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    stopping_ = true;
  }
  jobs_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::string RestServer::url() const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return scheme_ + "://" + host + ":" + std::to_string(port_);
}

void RestServer::Enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.push_back(std::move(job));
  }
  jobs_cv_.notify_one();
}

void RestServer::WorkerLoop() {
  std::unique_lock<std::mutex> lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping and drained
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

std::vector<SegmentInfo> RestServer::Segments() const {
  const AllocatorStats dram = deps_.store->dram().Stats();
  const std::string prefix = "rank-" + std::to_string(options_.rank);
  std::vector<SegmentInfo> out = {
      SegmentInfo{prefix + "-dram", Medium::kDram, dram.capacity, dram.allocated}};
  if (deps_.store->has_ssd()) {
    const AllocatorStats ssd = deps_.store->Stats().tier.ssd;
    out.push_back(SegmentInfo{prefix + "-ssd", Medium::kSsd, ssd.capacity, ssd.allocated});
  }
  return out;
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
  s.ops = &deps_.store->op_stats();
  for (uint32_t r = 0; r < OpStats::kMaxRanks; ++r) {
    if (s.ops->RankSeen(r)) s.ranks.push_back(r);
  }
  s.store = deps_.store->Stats();
  const TierStats& t = s.store.tier;
  s.tiers = TierCounters{t.flush_blobs,  t.flush_bytes,          t.rewarm,      t.rewarm_failed,
                         t.rewarm_bytes, t.rewarm_bytes_current, t.get_hits_ssd};
  s.events_enabled = deps_.publisher != nullptr;
  if (deps_.publisher != nullptr) s.events = deps_.publisher->Stats();
  s.events_queue_capacity =
      deps_.publisher != nullptr ? s.events.queue_capacity : options_.events_queue_capacity;
  s.clients = deps_.server->client_metrics().Snapshot(deps_.store->clock()->NowUnixMillis());
  s.client_reports = deps_.server->client_metrics().Stats();
  s.server = deps_.server->Stats();
  return s;
}

}  // namespace tierkv
