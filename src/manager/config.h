// ManagerConfig: everything tierkv-server is configured with, from flags and an
// optional TOML/INI file (--config). Sizes take units ("4gb", "512MiB").
// Validation is complete before anything starts: an invalid value fails with a
// message naming the option, and the manager never starts half-configured.
#ifndef TIERKV_MANAGER_CONFIG_H_
#define TIERKV_MANAGER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "events/publisher.h"
#include "http/rest_server.h"
#include "media/hbm_tier.h"
#include "server/server.h"
#include "store/store.h"
#include "tierkv/status.h"

namespace tierkv {

// The SSD tier (off while `dir` is empty).
struct SsdConfig {
  std::string dir;                 // holds the blob file tierkv-ssd.dat
  uint64_t size = 4ull << 30;      // preallocated file size
  std::string io_engine = "auto";  // auto (io_uring, else pread), io_uring, pread
  bool direct = true;              // O_DIRECT (falls back to buffered where refused)
};

// Cluster mode (on when `etcd_endpoints` is not empty). docs/cluster.md.
struct ClusterConfig {
  std::vector<std::string> etcd_endpoints;
  std::string cluster_name = "default";
  std::string addr;                                // peer gRPC listener HOST:PORT
  std::string advertise_addr;                      // what peers dial (default: addr)
  std::string data_addr;                           // data channel HOST:PORT
  int64_t ttl_secs = 30;                           // membership lease TTL
  uint64_t inventory_journal_bytes = 16ull << 20;  // the store's change journal
  uint64_t index_budget = 256ull << 20;            // global index: active + staging views
  int64_t coalesce_ms = 0;                         // owner: quiet window that batches deltas
  int64_t stall_ms = 3000;                         // requester: a silent stream is dropped
  std::string on_fence = "rejoin";                 // rejoin (new incarnation) | exit (code 3)
  uint32_t peer_max_connections = 1024;            // peer gRPC port: connections open at once
  int64_t peer_handshake_timeout_ms = 5000;        // a peer connection's first byte, after accept
  int64_t peer_idle_timeout_ms = 300000;           // a peer connection moving no byte is closed
  uint64_t transfer_budget = 0;                    // source grants' bytes (0: half --dram-size)
  int64_t grant_timeout_ms = 30000;                // an unreleased grant ends after this
  uint32_t data_connections = 4;                   // data channel connections per peer
  bool remote_lookahead = true;  // authorize a plan's next segment during the current READs
  std::string remote_authorize_via = "data";  // "data" (the data channel) or "grpc" (peer gRPC)
  // Peer mTLS (all three or none): this manager's certificate and key, and the
  // CA every peer's certificate must chain to.
  std::string peer_tls_cert, peer_tls_key, peer_tls_ca;
  // Metadata subscription scope: "all" (no scope flag), "exact" (the sorted,
  // distinct --metadata-namespace values) or "empty" (--metadata-empty-scope).
  std::string scope_kind = "all";
  std::vector<std::string> scope_namespaces;
  bool rank_given = false;     // --rank was set (else the cluster assigns one)
  bool dp_rank_given = false;  // --dp-rank was set
  bool enabled() const { return !etcd_endpoints.empty(); }
};

struct ManagerConfig {
  uint64_t dram_size = 1ull << 30;
  bool dram_huge_pages = true;  // ask for 2 MiB pages for the pool (the kernel decides)
  std::string log_level = "info";
  std::string node_id;  // this manager's identity (KV events backend_id); default: hostname
  StoreOptions store;
  ServerOptions server;
  bool kv_events = false;  // --kv-events-endpoint given
  events::PublisherOptions events;
  std::string data_dir;  // persisted state (metadata); empty: memory only
  SsdConfig ssd;
  HbmConfig hbm;  // --hbm-*: the HBM tier (docs/hbm.md)
  // Testing: every Nth DRAM pool allocation fails as if the pool were full
  // (0 = never). Lets tests drive NO_SPACE paths in a real process.
  uint32_t inject_alloc_failures = 0;
  uint32_t inject_commit_failures = 0;
  uint32_t inject_read_checksum_failures = 0;  // every Nth READ answered gets a wrong checksum
  RestOptions rest;
  ClusterConfig cluster;
};

// The embedded defaults (what `tierkv-server` with no flags runs with).
ManagerConfig DefaultManagerConfig();

// Parses and validates `args` (without the program name). On --help or
// --version, *exit_now is set and *message holds the text to print.
// Errors: INVALID_ARGUMENT with a message naming the option.
Result<ManagerConfig> ParseManagerConfig(const std::vector<std::string>& args, bool* exit_now,
                                         std::string* message);

}  // namespace tierkv

#endif  // TIERKV_MANAGER_CONFIG_H_
