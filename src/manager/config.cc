#include "manager/config.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/units.h"
#include "protocol/socket_io.h"

namespace tierkv {
namespace {

constexpr const char* kVersion = "0.1.0";

Status SizeOption(const std::string& name, const std::string& text, uint64_t* out) {
  Result<uint64_t> v = ParseByteSize(text);
  if (!v.ok()) return InvalidArgument("--" + name + ": " + v.status().message());
  *out = *v;
  return Status::Ok();
}

// --hbm-devices ("none", or distinct ordinals "0,1"), --hbm-size and
// --hbm-backend, into `hbm`.
Status HbmOptions(const std::string& devices, const std::string& size, HbmConfig* hbm) {
  hbm->devices.clear();
  if (devices != "none" && !devices.empty()) {
    size_t start = 0;
    for (;;) {
      const size_t comma = devices.find(',', start);
      const std::string item = devices.substr(start, comma - start);
      char* end = nullptr;
      errno = 0;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > 1023) {
        return InvalidArgument("--hbm-devices must be none or GPU ordinals like 0,1; got '" +
                               devices + "'");
      }
      if (std::find(hbm->devices.begin(), hbm->devices.end(), v) != hbm->devices.end()) {
        return InvalidArgument("--hbm-devices names GPU " + item + " twice");
      }
      hbm->devices.push_back(static_cast<int>(v));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (Status st = SizeOption("hbm-size", size, &hbm->size); !st.ok()) return st;
  if (!hbm->enabled() && hbm->size != 0) {
    return InvalidArgument("--hbm-size needs --hbm-devices (the GPUs it is taken from)");
  }
  if (hbm->enabled() && hbm->size < (1ull << 20)) {
    return InvalidArgument("--hbm-devices needs --hbm-size, at least 1MiB per device");
  }
  if (hbm->backend != "cuda" && hbm->backend != "host") {
    return InvalidArgument("--hbm-backend must be cuda or host, got '" + hbm->backend + "'");
  }
  return Status::Ok();
}

Status Validate(ManagerConfig& c, const std::string& uds_mode, const std::string& max_frame,
                const std::string& max_pinned) {
  if (c.dram_size < (1ull << 20)) return InvalidArgument("--dram-size must be at least 1 MiB");
  if (c.store.max_object_bytes == 0 || c.store.max_object_bytes > (2ull << 30) - (2ull << 20)) {
    return InvalidArgument("--max-object-bytes must be between 1 byte and 2 GiB - 2 MiB");
  }
  uint64_t frame = 0;
  if (Status st = SizeOption("max-frame-bytes", max_frame, &frame); !st.ok()) return st;
  if (frame == 0) frame = c.store.max_object_bytes + (1ull << 20);
  if (frame < 4096 || frame > (2ull << 30) - 1) {
    return InvalidArgument("--max-frame-bytes must be between 4 KiB and 2 GiB");
  }
  c.server.max_frame_bytes = static_cast<uint32_t>(frame);
  if (Status st = SizeOption("max-pinned-bytes", max_pinned, &c.server.max_pinned_bytes);
      !st.ok()) {
    return st;
  }
  if (c.server.max_pinned_bytes == 0) c.server.max_pinned_bytes = c.dram_size / 4;
  if (c.store.max_key_bytes == 0 || c.store.max_key_bytes > (1u << 20)) {
    return InvalidArgument("--max-key-bytes must be between 1 and 1048576");
  }
  try {
    size_t used = 0;
    const unsigned long mode = std::stoul(uds_mode, &used, 8);
    if (used != uds_mode.size() || mode > 0777) throw std::invalid_argument("mode");
    c.server.uds_mode = static_cast<uint32_t>(mode);
  } catch (const std::exception&) {
    return InvalidArgument("--uds-mode must be octal permission bits such as 0660, got '" +
                           uds_mode + "'");
  }
  if (!c.server.tcp_listen.empty()) {
    Result<proto::Address> addr = proto::ParseAddress("tcp://" + c.server.tcp_listen);
    if (!addr.ok()) return InvalidArgument("--listen: " + addr.status().message());
  }
  if (!c.server.uds_path.empty()) {
    Result<proto::Address> addr = proto::ParseAddress("unix:" + c.server.uds_path);
    if (!addr.ok()) return InvalidArgument("--uds-path: " + addr.status().message());
  }
  if (c.server.uds_path.empty() && c.server.tcp_listen.empty()) {
    return InvalidArgument("--uds-path and --listen are both empty: nothing to listen on");
  }
  if (!(c.store.low_watermark > 0 && c.store.low_watermark <= c.store.high_watermark &&
        c.store.high_watermark <= 1)) {
    return InvalidArgument(
        "--evict-low-watermark and --evict-high-watermark must satisfy 0 < low <= high <= 1");
  }
  const uint32_t s = c.store.shards;
  if (s == 0 || s > 256 || (s & (s - 1)) != 0) {
    return InvalidArgument("--shards must be a power of two between 1 and 256");
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level) == std::end(kLevels)) {
    return InvalidArgument("--log-level must be one of trace, debug, info, warn, error, off");
  }
  if (c.server.max_batch == 0) return InvalidArgument("--max-batch must be positive");
  if (c.server.max_connections == 0) return InvalidArgument("--max-connections must be positive");
  if (c.server.max_open_connections == 0) {
    return InvalidArgument("--max-open-connections must be positive");
  }
  if (c.server.handshake_timeout_ms <= 0) {
    return InvalidArgument("--handshake-timeout-ms must be positive");
  }
  if (c.rest.max_connections == 0) {
    return InvalidArgument("--metrics-max-connections must be positive");
  }
  if (c.rest.request_timeout_ms <= 0 || c.rest.keepalive_ms <= 0) {
    return InvalidArgument(
        "--metrics-request-timeout-ms and --metrics-keepalive-ms must be positive");
  }
  if (c.server.max_metric_ranks == 0) {
    return InvalidArgument("--max-metric-ranks must be positive");
  }
  if (c.server.spin_us < 0 || c.server.spin_us > 1000000) {
    return InvalidArgument("--spin-us must be between 0 and 1000000");
  }
  if (c.server.io_timeout_ms <= 0) return InvalidArgument("--io-timeout-ms must be positive");
  if (c.store.lease_ms <= 0) return InvalidArgument("--lease-ms must be positive");
  if (c.store.alloc_timeout_ms <= 0) return InvalidArgument("--alloc-timeout-ms must be positive");
  if (c.store.ssd_queue_depth < 1 || c.store.ssd_queue_depth > kMaxSsdQueueDepth) {
    return InvalidArgument("--ssd-queue-depth must be between 1 and " +
                           std::to_string(kMaxSsdQueueDepth));
  }
  return Status::Ok();
}

Status ValidateHostPort(const std::string& flag, const std::string& value) {
  Result<proto::Address> addr = proto::ParseAddress("tcp://" + value);
  if (!addr.ok()) return InvalidArgument(flag + ": " + addr.status().message());
  return Status::Ok();
}

// The subscription scope: exact namespaces sorted and distinct, at most 256,
// and the encoded open request (74 bytes a namespace, with framing) at most
// 64 KiB; --metadata-empty-scope alone.
Status ValidateScope(bool empty_scope, ClusterConfig& cl) {
  std::vector<std::string>& ns = cl.scope_namespaces;
  if (empty_scope && !ns.empty()) {
    return InvalidArgument("--metadata-empty-scope and --metadata-namespace exclude each other");
  }
  for (const std::string& n : ns) {
    if (!ValidNamespace(n)) {
      return InvalidArgument("--metadata-namespace '" + n +
                             "' is not a storage namespace (tierkv:v1: and 64 lowercase hex)");
    }
  }
  std::sort(ns.begin(), ns.end());
  ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
  if (ns.size() > 256) {
    return InvalidArgument("--metadata-namespace: at most 256 distinct namespaces, got " +
                           std::to_string(ns.size()));
  }
  size_t encoded = 64;
  for (const std::string& n : ns) encoded += n.size() + 3;
  if (encoded > (64u << 10)) return InvalidArgument("--metadata-namespace: scope over 64 KiB");
  cl.scope_kind = empty_scope ? "empty" : ns.empty() ? "all" : "exact";
  if (!cl.enabled() && cl.scope_kind != "all") {
    return InvalidArgument("--metadata-namespace and --metadata-empty-scope need --etcd-endpoints");
  }
  return Status::Ok();
}

Status ValidateCluster(const std::string& endpoints, ClusterConfig& cl) {
  cl.etcd_endpoints.clear();
  size_t start = 0;
  while (start <= endpoints.size() && !endpoints.empty()) {
    const size_t comma = std::min(endpoints.find(',', start), endpoints.size());
    std::string e = endpoints.substr(start, comma - start);
    e.erase(0, e.find_first_not_of(' '));
    e.erase(e.find_last_not_of(' ') + 1);
    if (e.empty())
      return InvalidArgument("--etcd-endpoints has an empty entry: '" + endpoints + "'");
    cl.etcd_endpoints.push_back(e);
    start = comma + 1;
  }
  if (!cl.enabled()) {
    if (!cl.addr.empty() || !cl.advertise_addr.empty() || !cl.data_addr.empty()) {
      return InvalidArgument("--addr, --peer-advertise-addr and --data-addr need --etcd-endpoints");
    }
    return Status::Ok();
  }
  if (cl.cluster_name.empty() || cl.cluster_name.size() > 128 ||
      cl.cluster_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_.") != std::string::npos) {
    return InvalidArgument(
        "--cluster-name must be 1-128 characters of letters, digits, '-', '_' and '.'");
  }
  if (cl.addr.empty()) return InvalidArgument("cluster mode (--etcd-endpoints) needs --addr");
  if (Status st = ValidateHostPort("--addr", cl.addr); !st.ok()) return st;
  if (cl.advertise_addr.empty()) cl.advertise_addr = cl.addr;
  if (Status st = ValidateHostPort("--peer-advertise-addr", cl.advertise_addr); !st.ok()) return st;
  if (!cl.data_addr.empty()) {
    if (Status st = ValidateHostPort("--data-addr", cl.data_addr); !st.ok()) return st;
  }
  if (cl.ttl_secs < 2 || cl.ttl_secs > 3600) {
    return InvalidArgument("--membership-ttl-secs must be between 2 and 3600");
  }
  return Status::Ok();
}

}  // namespace

ManagerConfig DefaultManagerConfig() {
  ManagerConfig c;
  c.store.max_object_bytes = 64ull << 20;
  c.server.uds_path = "/tmp/tierkv.sock";
  c.server.tcp_listen = "127.0.0.1:7600";
  c.server.max_frame_bytes = static_cast<uint32_t>(c.store.max_object_bytes + (1ull << 20));
  return c;
}

Result<ManagerConfig> ParseManagerConfig(const std::vector<std::string>& args, bool* exit_now,
                                         std::string* message) {
  *exit_now = false;
  ManagerConfig c = DefaultManagerConfig();
  std::string dram_size = "1GiB";
  std::string max_object = "64MiB";
  std::string max_frame = "0";
  std::string max_pinned = "0";
  std::string max_registered = "4GiB", max_registered_client = "1GiB";
  std::string uds_mode = "0660";

  CLI::App app{"tierkv-server: the tierkv manager (tiered KV-cache store)", "tierkv-server"};
  app.set_version_flag("--version", kVersion);
  app.set_config("--config", "", "read options from a TOML or INI file")->check(CLI::ExistingFile);
  // Dotted keys such as ock.mmc.metrics.tls.enable are option names, not sections.
  app.get_config_formatter_base()->parentSeparator('\x1f');
  app.option_defaults()->always_capture_default();
  app.add_option("--dram-size", dram_size, "DRAM pool size (units: kb, mb, gb, KiB, ...)");
  app.add_option("--dram-huge-pages", c.dram_huge_pages,
                 "ask the kernel for 2 MiB pages for the DRAM pool (granted when "
                 "/sys/kernel/mm/transparent_hugepage/shmem_enabled is advise, always or "
                 "within_size)");
  app.add_option("--uds-path", c.server.uds_path, "Unix socket for same-host clients ('' = off)");
  app.add_option("--uds-mode", uds_mode, "permission bits of the Unix socket (octal)");
  app.add_option("--listen", c.server.tcp_listen, "TCP HOST:PORT for remote clients ('' = off)");
  app.add_option("--rank", c.server.rank, "this manager's rank (segment names rank-<rank>-*)");
  app.add_option("--lease-ms", c.store.lease_ms, "read lease length in milliseconds");
  app.add_option("--alloc-timeout-ms", c.store.alloc_timeout_ms,
                 "an uncommitted put is revoked after this many milliseconds");
  app.add_option("--max-key-bytes", c.store.max_key_bytes, "longest key accepted");
  app.add_option("--max-object-bytes", max_object, "largest value accepted");
  app.add_option("--max-frame-bytes", max_frame,
                 "largest request frame accepted (0 = max-object-bytes + 1 MiB)");
  app.add_option("--max-pinned-bytes", max_pinned,
                 "most bytes one client connection may hold pinned as zero-copy views "
                 "(0 = a quarter of --dram-size)");
  app.add_option("--max-registered-bytes", max_registered,
                 "most bytes of client memory registered for gets to write into, all clients "
                 "together (0 = registration refused)");
  app.add_option("--max-registered-bytes-per-client", max_registered_client,
                 "most bytes of memory one client connection may register");
  app.add_option("--max-registered-regions-per-client", c.server.max_registered_regions_per_client,
                 "most memory regions one client connection may register at once");
  app.add_option("--max-group-bytes", c.store.max_group_bytes, "longest group_id accepted");
  app.add_option("--max-batch", c.server.max_batch, "most items in one batch call");
  app.add_option("--max-metric-ranks", c.server.max_metric_ranks,
                 "most client ranks whose reported transfer metrics are kept at once");
  app.add_option("--max-connections", c.server.max_connections,
                 "most client sessions served at once (idle ones hold no thread and do not count)");
  app.add_option("--max-open-connections", c.server.max_open_connections,
                 "most client connections open, working or idle; over it the oldest idle one "
                 "is closed");
  app.add_option("--handshake-timeout-ms", c.server.handshake_timeout_ms,
                 "a client connection that has not completed HELLO this long after connecting "
                 "is closed");
  app.add_option(
      "--spin-us", c.server.spin_us,
      "most a busy connection is polled for its next request before sleeping; "
      "adaptive (about twice the client's usual gap after a request of the same "
      "kind; a client up to 8 times slower, at most 20 ms, is slept for until shortly before its "
      "request is due, then polled for), and not while "
      "other tasks keep taking the core from the poll (0 = never); in cluster mode "
      "also the most a remote read polls an owner's data connection before sleeping");
  app.add_option("--io-timeout-ms", c.server.io_timeout_ms,
                 "drop a client that stalls this long in the middle of a frame");
  app.add_option("--evict-high-watermark", c.store.high_watermark,
                 "background eviction starts above this fill ratio");
  app.add_option("--evict-low-watermark", c.store.low_watermark, "... and stops at this one");
  std::string evict_policy = "s3fifo";
  app.add_option("--evict-policy", evict_policy,
                 "how DRAM victims are chosen: s3fifo or lru (docs/store.md)");
  app.add_option("--shards", c.store.shards, "object index shards (power of two, <= 256)");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off");
  app.add_option("--node-id", c.node_id, "this manager's identity (default: the host name)");
  app.add_option("--data-dir", c.data_dir,
                 "directory for persisted state such as /metadata ('' = memory only)");
  std::string hbm_devices = "none";
  std::string hbm_size = "0";
  app.add_option("--hbm-devices", hbm_devices,
                 "GPU ordinals whose memory the HBM tier uses, comma-separated, or none "
                 "(docs/hbm.md)");
  app.add_option("--hbm-size", hbm_size, "HBM tier bytes per device in --hbm-devices");
  app.add_option("--hbm-backend", c.hbm.backend,
                 "cuda (the NVIDIA driver, loaded at run time) or host (stand-in devices "
                 "of host memory, for hosts without a GPU)");
  app.add_option("--hbm-cuda-library", c.hbm.cuda_library,
                 "the NVIDIA driver library to load ('' = libcuda.so.1)");
  std::string ssd_size = "4GiB";
  app.add_option("--ssd-dir", c.ssd.dir,
                 "directory of the SSD tier's blob file ('' = no SSD tier); created if missing");
  app.add_option("--ssd-size", ssd_size, "size of the SSD tier's preallocated file");
  app.add_option("--ssd-io-engine", c.ssd.io_engine,
                 "auto (io_uring, else pread/pwrite), io_uring or pread");
  app.add_option("--ssd-direct", c.ssd.direct,
                 "O_DIRECT I/O (buffered where the file system refuses it)");
  app.add_option("--ssd-write-through", c.store.ssd_write_through,
                 "copy every committed object to SSD at once, not only when it is evicted");
  app.add_option("--ssd-queue-depth", c.store.ssd_queue_depth,
                 "most SSD transfers kept in flight together by one eviction pass, batch get "
                 "or the prefetch queue (1 .. 64)");
  app.add_option("--ssd-high-watermark", c.store.ssd_high_watermark,
                 "background SSD eviction starts above this fill ratio");
  app.add_option("--ssd-low-watermark", c.store.ssd_low_watermark, "... and stops at this one");
  app.add_option("--inject-commit-failures", c.inject_commit_failures,
                 "testing only: refuse every Nth commit as if its write grant had expired "
                 "(LEASE_EXPIRED) (0 = never)");
  app.add_option("--inject-alloc-failures", c.inject_alloc_failures,
                 "testing only: fail every Nth DRAM allocation as if the pool were full "
                 "(0 = never)");
  app.add_option("--inject-read-checksum-failures", c.inject_read_checksum_failures,
                 "testing only: send every Nth READ this manager answers on its data channel "
                 "with a wrong checksum (0 = never)");
  RestOptions& rest = c.rest;
  std::string max_body = "8MiB";
  app.add_option("--metrics-url,--ock.mmc.meta_service.metrics_url", rest.url,
                 "REST admin API address, http://HOST:PORT (port 0 picks one)");
  app.add_option("--metrics-per-rank", rest.per_rank,
                 "also export per-rank series and summary fields");
  app.add_option("--metrics-max-body", max_body, "largest REST request body accepted");
  app.add_option("--metrics-max-connections", rest.max_connections,
                 "most REST connections open at once; over it the longest idle one is closed");
  app.add_option("--metrics-request-timeout-ms", rest.request_timeout_ms,
                 "a REST request (head and body) must arrive within this, or gets 408");
  app.add_option("--metrics-keepalive-ms", rest.keepalive_ms,
                 "an idle kept-alive REST connection is closed after this");
  app.add_option("--metrics-tls,--ock.mmc.metrics.tls.enable", rest.tls,
                 "serve the REST API over TLS, requiring client certificates when a CA is set");
  app.add_option("--metrics-tls-cert,--ock.mmc.metrics.tls.cert_path", rest.tls_cert,
                 "server certificate (PEM)");
  app.add_option("--metrics-tls-key,--ock.mmc.metrics.tls.key_path", rest.tls_key,
                 "server private key (PEM)");
  app.add_option("--metrics-tls-ca,--ock.mmc.metrics.tls.ca_path", rest.tls_ca,
                 "CA certificate (PEM) that client certificates must be signed by (mTLS)");
  int dp_rank = -1;
  app.add_option("--dp-rank", dp_rank, "dp_rank of KV events (default: --rank)");
  events::PublisherOptions& ev = c.events;
  std::string model_name, salt, lora;
  app.add_option(
      "--kv-events-endpoint", ev.endpoint,
      "ZMQ PUB address of the KV event stream, e.g. tcp://127.0.0.1:5557 (off if empty)");
  app.add_option("--kv-events-queue-capacity", ev.queue_capacity,
                 "events queued before stored events are dropped");
  app.add_option("--kv-events-queue-hard-limit", ev.queue_hard_limit,
                 "events queued before removed/cleared events are dropped too (0: 2 x capacity)");
  app.add_option("--kv-events-model-name", model_name, "model_name of every event (nil if empty)");
  app.add_option("--kv-events-block-size", ev.envelope.block_size, "block_size (0: nil)");
  app.add_option("--kv-events-additional-salt", salt, "additional_salt (nil if empty)");
  app.add_option("--kv-events-lora-name", lora, "lora_name (nil if empty)");
  app.add_option("--kv-events-emit-legacy-compat,--kv_events_emit_legacy_compat",
                 ev.envelope.emit_legacy_compat,
                 "also emit the legacy type/block_hashes/parent_block_hash fields");
  app.add_option("--kv-events-emit-object-key,--kv_events_emit_object_key",
                 ev.envelope.emit_object_key,
                 "emit object_key; false suppresses stored/removed events entirely");
  app.add_option("--kv-events-replay-endpoint", ev.replay_endpoint,
                 "ZMQ ROUTER address answering REPLAY/SNAPSHOT requests (off if empty)");
  app.add_option("--kv-events-replay-buffer", ev.replay_buffer, "messages kept for replay");
  app.add_option("--kv-events-batch-linger-us", ev.batch_linger_us,
                 "while events keep coming, wait up to this long for a partial message to fill "
                 "(0: send at once)");
  app.add_option("--kv-events-snapshot-on-join", ev.snapshot_on_join,
                 "answer SNAPSHOT requests on the replay socket");

  ClusterConfig& cl = c.cluster;
  std::string etcd_endpoints;
  app.add_option("--etcd-endpoints", etcd_endpoints,
                 "comma-separated etcd endpoints (host:port or http://host:port); enables "
                 "cluster mode");
  app.add_option("--cluster-name", cl.cluster_name, "the cluster this manager joins");
  app.add_option("--addr", cl.addr, "peer gRPC listener HOST:PORT (cluster mode)");
  app.add_option("--peer-advertise-addr", cl.advertise_addr,
                 "address peers dial to reach --addr (default: --addr)");
  app.add_option("--data-addr", cl.data_addr, "peer data channel HOST:PORT (cluster mode)");
  app.add_option("--membership-ttl-secs", cl.ttl_secs, "membership lease TTL in seconds");
  std::string journal = "16MiB", index_budget = "256MiB";
  app.add_option("--inventory-journal-bytes", journal,
                 "cluster mode: the change journal peers' inventory streams read from");
  app.add_option("--index-budget", index_budget,
                 "cluster mode: memory for the global index (installed and staging views)");
  std::string transfer_budget;
  app.add_option("--transfer-budget", transfer_budget,
                 "cluster mode: bytes peers' source grants may hold pinned (default: half of "
                 "--dram-size)");
  app.add_option("--transfer-grant-timeout-ms", cl.grant_timeout_ms,
                 "cluster mode: a source grant not released by its requester ends after this");
  app.add_option("--data-connections", cl.data_connections,
                 "cluster mode: data channel connections to each peer (READs at once: at "
                 "most one per CPU)");
  app.add_option("--peer-tls-cert", cl.peer_tls_cert,
                 "cluster mode: PEM certificate chain this manager presents to peers (mutual TLS "
                 "on peer gRPC and the data channel)");
  app.add_option("--peer-tls-key", cl.peer_tls_key, "cluster mode: PEM key of --peer-tls-cert");
  app.add_option("--peer-tls-ca", cl.peer_tls_ca,
                 "cluster mode: PEM CA that must have signed every peer's certificate");
  app.add_option("--remote-read-lookahead", cl.remote_lookahead,
                 "cluster mode: authorize the next segment of a remote read while the current "
                 "one is read (true/false)");
  app.add_option("--remote-authorize-via", cl.remote_authorize_via,
                 "cluster mode: where this manager sends its authorizations: data (the owner's "
                 "data channel) or grpc (peer gRPC)")
      ->check(CLI::IsMember({"data", "grpc"}));
  app.add_option("--inventory-stream-coalesce-ms", cl.coalesce_ms,
                 "cluster mode: quiet window (0-5 ms) in which an owner batches deltas");
  app.add_option("--peer-max-connections", cl.peer_max_connections,
                 "cluster mode: most connections open at once on the peer gRPC port (--addr); "
                 "a new one over it sheds the one silent or idle the longest");
  app.add_option("--peer-handshake-timeout-ms", cl.peer_handshake_timeout_ms,
                 "cluster mode: a peer connection that sends nothing this long after its accept "
                 "is closed");
  app.add_option("--peer-idle-timeout-ms", cl.peer_idle_timeout_ms,
                 "cluster mode: a peer connection that moves no byte either way this long is "
                 "closed");
  app.add_option("--on-fence", cl.on_fence,
                 "cluster mode: after the registration is fenced (etcd unreachable for half the "
                 "TTL), rejoin (register a new incarnation in this process once etcd answers, "
                 "keeping DRAM and SSD) or exit (status 3, for a supervisor to restart it)")
      ->check(CLI::IsMember({"rejoin", "exit"}));
  app.add_option("--inventory-stall-ms", cl.stall_ms,
                 "cluster mode: an inventory stream that brings no frame (not even the owner's "
                 "heartbeat, sent every second) for this long is dropped and that owner's view "
                 "turns partial");
  app.add_option("--metadata-namespace", cl.scope_namespaces,
                 "cluster mode: subscribe to exactly these namespaces (repeatable)");
  bool empty_scope = false;
  app.add_flag("--metadata-empty-scope", empty_scope,
               "cluster mode: subscribe to no remote namespace");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    *exit_now = true;
    *message = app.help();
    return c;
  } catch (const CLI::CallForVersion&) {
    *exit_now = true;
    *message = std::string("tierkv-server ") + kVersion + "\n";
    return c;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  if (Status st = SizeOption("dram-size", dram_size, &c.dram_size); !st.ok()) return st;
  if (evict_policy == "s3fifo") {
    c.store.evict_policy = EvictPolicy::kS3Fifo;
  } else if (evict_policy == "lru") {
    c.store.evict_policy = EvictPolicy::kLru;
  } else {
    return InvalidArgument("--evict-policy must be s3fifo or lru, got '" + evict_policy + "'");
  }
  if (Status st = SizeOption("max-object-bytes", max_object, &c.store.max_object_bytes); !st.ok()) {
    return st;
  }
  if (Status st = Validate(c, uds_mode, max_frame, max_pinned); !st.ok()) return st;
  if (Status st =
          SizeOption("max-registered-bytes", max_registered, &c.server.max_registered_bytes);
      !st.ok()) {
    return st;
  }
  if (Status st = SizeOption("max-registered-bytes-per-client", max_registered_client,
                             &c.server.max_registered_bytes_per_client);
      !st.ok()) {
    return st;
  }
  if (Status st = HbmOptions(hbm_devices, hbm_size, &c.hbm); !st.ok()) return st;
  if (Status st = SizeOption("ssd-size", ssd_size, &c.ssd.size); !st.ok()) return st;
  if (!c.ssd.dir.empty() && c.ssd.size < (8u << 20)) {
    return InvalidArgument("--ssd-size must be at least 8MiB");
  }
  if (c.ssd.io_engine != "auto" && c.ssd.io_engine != "io_uring" && c.ssd.io_engine != "pread") {
    return InvalidArgument("--ssd-io-engine must be auto, io_uring or pread, got '" +
                           c.ssd.io_engine + "'");
  }
  if (!(c.store.ssd_low_watermark > 0 && c.store.ssd_low_watermark <= c.store.ssd_high_watermark &&
        c.store.ssd_high_watermark <= 1.0)) {
    return InvalidArgument(
        "--ssd-low-watermark and --ssd-high-watermark must satisfy 0 < low <= high <= 1");
  }
  if (Status st = SizeOption("metrics-max-body", max_body, &c.rest.max_body_bytes); !st.ok()) {
    return st;
  }
  if (c.rest.url.rfind("http://", 0) != 0 && c.rest.url.rfind("https://", 0) != 0) {
    return InvalidArgument("--metrics-url must start with http:// or https://, got '" + c.rest.url +
                           "'");
  }
  if (c.rest.tls && (c.rest.tls_cert.empty() || c.rest.tls_key.empty())) {
    return InvalidArgument(
        "--metrics-tls needs --metrics-tls-cert and --metrics-tls-key "
        "(ock.mmc.metrics.tls.cert_path / key_path)");
  }
  // An empty value (say an unset shell variable) would leave no namespace in
  // the list, which would mean every namespace: refused like any other.
  if (app.count("--metadata-namespace") > cl.scope_namespaces.size() ||
      std::count(cl.scope_namespaces.begin(), cl.scope_namespaces.end(), "") > 0) {
    return InvalidArgument(
        "--metadata-namespace '' is not a storage namespace (tierkv:v1: and 64 lowercase hex)");
  }
  cl.rank_given = app.count("--rank") > 0;
  cl.dp_rank_given = dp_rank >= 0;
  if (Status st = ValidateCluster(etcd_endpoints, cl); !st.ok()) return st;
  if (Status st = SizeOption("inventory-journal-bytes", journal, &cl.inventory_journal_bytes);
      !st.ok()) {
    return st;
  }
  if (Status st = SizeOption("index-budget", index_budget, &cl.index_budget); !st.ok()) return st;
  if (cl.inventory_journal_bytes < (64u << 10)) {
    return InvalidArgument("--inventory-journal-bytes must be at least 64KiB");
  }
  if (cl.enabled()) c.store.journal_bytes = cl.inventory_journal_bytes;
  if (cl.coalesce_ms < 0 || cl.coalesce_ms > 5) {
    return InvalidArgument("--inventory-stream-coalesce-ms must be between 0 and 5");
  }
  if (cl.peer_max_connections < 4) {
    return InvalidArgument("--peer-max-connections must be at least 4");
  }
  if (cl.peer_handshake_timeout_ms < 100 || cl.peer_handshake_timeout_ms > 600000) {
    return InvalidArgument("--peer-handshake-timeout-ms must be between 100 and 600000");
  }
  if (cl.peer_idle_timeout_ms < 1000) {
    return InvalidArgument("--peer-idle-timeout-ms must be at least 1000");
  }
  if (cl.stall_ms < 2000 || cl.stall_ms > 600000) {
    return InvalidArgument(
        "--inventory-stall-ms must be between 2000 and 600000 (owners send a heartbeat every "
        "second)");
  }
  if (Status st = ValidateScope(empty_scope, cl); !st.ok()) return st;
  if (!transfer_budget.empty()) {
    if (Status st = SizeOption("transfer-budget", transfer_budget, &cl.transfer_budget); !st.ok()) {
      return st;
    }
    if (cl.transfer_budget == 0) return InvalidArgument("--transfer-budget must be positive");
  }
  if (cl.transfer_budget == 0) cl.transfer_budget = c.dram_size / 2;
  if (cl.grant_timeout_ms < 100 || cl.grant_timeout_ms > 3'600'000) {
    return InvalidArgument("--transfer-grant-timeout-ms must be between 100 and 3600000");
  }
  if (cl.data_connections < 1 || cl.data_connections > 64) {
    return InvalidArgument("--data-connections must be between 1 and 64");
  }
  const int tls_given =
      !cl.peer_tls_cert.empty() + !cl.peer_tls_key.empty() + !cl.peer_tls_ca.empty();
  if (tls_given != 0 && tls_given != 3) {
    return InvalidArgument("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together");
  }
  if (tls_given != 0 && !cl.enabled()) {
    return InvalidArgument(
        "--peer-tls-cert, --peer-tls-key and --peer-tls-ca need --etcd-endpoints");
  }
  c.rest.rank = c.server.rank;
  c.rest.events_queue_capacity = c.events.queue_capacity;
  if (c.node_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    c.node_id = host[0] ? host : "tierkv";
  }
  if (cl.enabled() &&
      (c.node_id.size() > 128 ||
       c.node_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789-_.") != std::string::npos)) {
    return InvalidArgument(
        "--node-id must be 1-128 characters of letters, digits, '-', '_' and '.' in cluster mode");
  }
  if (!model_name.empty()) ev.envelope.model_name = model_name;
  if (!salt.empty()) ev.envelope.additional_salt = salt;
  if (!lora.empty()) ev.envelope.lora_name = lora;
  ev.envelope.backend_id = c.node_id;
  ev.envelope.dp_rank = dp_rank >= 0 ? static_cast<uint32_t>(dp_rank) : c.server.rank;
  c.kv_events = !ev.endpoint.empty();
  if (ev.queue_capacity == 0) return InvalidArgument("--kv-events-queue-capacity must be positive");
  if (ev.queue_hard_limit != 0 && ev.queue_hard_limit < ev.queue_capacity) {
    return InvalidArgument(
        "--kv-events-queue-hard-limit must be 0 or >= --kv-events-queue-capacity");
  }
  if (!ev.replay_endpoint.empty() && !c.kv_events) {
    return InvalidArgument("--kv-events-replay-endpoint needs --kv-events-endpoint");
  }
  if (ev.snapshot_on_join && ev.replay_endpoint.empty()) {
    return InvalidArgument("--kv-events-snapshot-on-join needs --kv-events-replay-endpoint");
  }
  return c;
}

}  // namespace tierkv
