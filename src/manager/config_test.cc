#include "manager/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace tierkv {
namespace {

Result<ManagerConfig> Parse(std::vector<std::string> args) {
  bool exit_now = false;
  std::string message;
  return ParseManagerConfig(args, &exit_now, &message);
}

TEST(Config, EmbeddedDefaults) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dram_size, 1ull << 30);
  EXPECT_TRUE(c->dram_huge_pages);
  EXPECT_EQ(c->server.uds_path, "/tmp/tierkv.sock");
  EXPECT_EQ(c->server.uds_mode, 0660u);
  EXPECT_EQ(c->server.tcp_listen, "127.0.0.1:7600");
  EXPECT_EQ(c->store.lease_ms, 2000);
  EXPECT_EQ(c->store.max_key_bytes, 1024u);
  EXPECT_EQ(c->server.max_frame_bytes, c->store.max_object_bytes + (1u << 20));
  EXPECT_EQ(c->server.max_pinned_bytes, c->dram_size / 4);  // 0: a quarter of the pool
  auto pinned = Parse({"--max-pinned-bytes", "64MiB"});
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->server.max_pinned_bytes, 64ull << 20);
}

TEST(Config, HugePagesCanBeTurnedOff) {
  auto c = Parse({"--dram-huge-pages", "false"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->dram_huge_pages);
  EXPECT_FALSE(Parse({"--dram-huge-pages", "sometimes"}).ok());
}

TEST(Config, SizesTakeUnits) {
  auto c = Parse({"--dram-size", "4gb", "--max-object-bytes", "512MiB"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dram_size, 4ull << 30);
  EXPECT_EQ(c->store.max_object_bytes, 512ull << 20);
}

TEST(Config, InvalidValuesNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string option;
  };
  const Case cases[] = {
      {{"--dram-size", "lots"}, "--dram-size"},
      {{"--dram-size", "10kb"}, "--dram-size"},
      {{"--uds-mode", "999"}, "--uds-mode"},
      {{"--evict-low-watermark", "0.95"}, "watermark"},
      {{"--shards", "3"}, "--shards"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--uds-path", "", "--listen", ""}, "--listen"},
      {{"--max-frame-bytes", "1"}, "--max-frame-bytes"},
      {{"--max-pinned-bytes", "lots"}, "--max-pinned-bytes"},
      {{"--lease-ms", "0"}, "--lease-ms"},
      {{"--no-such-flag"}, "--no-such-flag"},
      {{"--rank", "minus"}, "--rank"},
  };
  for (const Case& c : cases) {
    auto r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.option;
    EXPECT_EQ(r.code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.option), std::string::npos) << r.status().message();
  }
}

TEST(Config, ReadsATomlFileAndFlagsOverrideIt) {
  char path[] = "/tmp/tierkv-config-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "dram-size = \"256MiB\"\nlease-ms = 500\nlisten = \"127.0.0.1:9999\"\n";
  }
  auto c = Parse({"--config", path, "--lease-ms", "700"});
  std::remove(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dram_size, 256ull << 20);
  EXPECT_EQ(c->server.tcp_listen, "127.0.0.1:9999");
  EXPECT_EQ(c->store.lease_ms, 700);
}

TEST(Config, ExampleConfigFileMatchesTheEmbeddedDefaults) {
  auto c = Parse({"--config", TIERKV_SOURCE_DIR "/deploy/tierkv.toml"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ManagerConfig d = DefaultManagerConfig();
  EXPECT_EQ(c->dram_size, d.dram_size);
  EXPECT_EQ(c->dram_huge_pages, d.dram_huge_pages);
  EXPECT_EQ(c->server.uds_path, d.server.uds_path);
  EXPECT_EQ(c->server.uds_mode, d.server.uds_mode);
  EXPECT_EQ(c->server.tcp_listen, d.server.tcp_listen);
  EXPECT_EQ(c->store.max_object_bytes, d.store.max_object_bytes);
  EXPECT_EQ(c->store.lease_ms, d.store.lease_ms);
  EXPECT_EQ(c->store.alloc_timeout_ms, d.store.alloc_timeout_ms);
  EXPECT_EQ(c->store.shards, d.store.shards);
  EXPECT_EQ(c->server.max_batch, d.server.max_batch);
  EXPECT_EQ(c->server.max_connections, d.server.max_connections);
  EXPECT_EQ(c->ssd.dir, d.ssd.dir);
  EXPECT_EQ(c->ssd.size, d.ssd.size);
  EXPECT_EQ(c->ssd.io_engine, d.ssd.io_engine);
  EXPECT_EQ(c->ssd.direct, d.ssd.direct);
  EXPECT_EQ(c->store.ssd_write_through, d.store.ssd_write_through);
  EXPECT_EQ(c->store.ssd_queue_depth, 8);
  EXPECT_EQ(c->store.ssd_high_watermark, d.store.ssd_high_watermark);
  EXPECT_EQ(c->store.ssd_low_watermark, d.store.ssd_low_watermark);
}

TEST(Config, HbmOptionsAreParsedAndValidated) {
  auto none = Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->hbm.enabled());  // no HBM unless asked for
  EXPECT_EQ(none->hbm.backend, "cuda");
  auto c = Parse({"--hbm-devices", "1,0", "--hbm-size", "2GiB", "--hbm-backend", "host"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hbm.devices, (std::vector<int>{1, 0}));
  EXPECT_EQ(c->hbm.size, 2ull << 30);
  EXPECT_EQ(c->hbm.backend, "host");
  EXPECT_FALSE(Parse({"--hbm-devices", "none", "--hbm-size", "0"})->hbm.enabled());
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--hbm-devices", "0"}, "--hbm-size"},
      {{"--hbm-devices", "0", "--hbm-size", "64KiB"}, "--hbm-size"},
      {{"--hbm-size", "1GiB"}, "--hbm-devices"},
      {{"--hbm-devices", "0,,1", "--hbm-size", "1GiB"}, "--hbm-devices"},
      {{"--hbm-devices", "-1", "--hbm-size", "1GiB"}, "--hbm-devices"},
      {{"--hbm-devices", "99999999999999999999", "--hbm-size", "1GiB"}, "--hbm-devices"},
      {{"--hbm-devices", "2,2", "--hbm-size", "1GiB"}, "twice"},
      {{"--hbm-devices", "0", "--hbm-size", "1GiB", "--hbm-backend", "rocm"}, "--hbm-backend"},
  };
  for (const auto& [args, fragment] : bad) {
    auto r = Parse(args);
    ASSERT_FALSE(r.ok()) << args[0] << " " << args[1];
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().ToString();
  }
}

TEST(Config, SsdOptionsAreParsedAndValidated) {
  auto c = Parse({"--ssd-dir", "/tmp/x", "--ssd-size", "64MiB", "--ssd-io-engine", "pread",
                  "--ssd-write-through", "true", "--ssd-queue-depth", "16"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store.ssd_queue_depth, 16);
  EXPECT_EQ(c->ssd.dir, "/tmp/x");
  EXPECT_EQ(c->ssd.size, 64ull << 20);
  EXPECT_EQ(c->ssd.io_engine, "pread");
  EXPECT_TRUE(c->store.ssd_write_through);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--ssd-dir", "/tmp/x", "--ssd-size", "1MiB"}, "--ssd-size"},
      {{"--ssd-size", "lots"}, "ssd-size"},
      {{"--ssd-io-engine", "aio"}, "--ssd-io-engine"},
      {{"--ssd-queue-depth", "0"}, "--ssd-queue-depth"},
      {{"--ssd-queue-depth", "65"}, "--ssd-queue-depth"},
      {{"--ssd-low-watermark", "0.95"}, "--ssd-low-watermark"},
  };
  for (const auto& [args, option] : bad) {
    auto r = Parse(args);
    ASSERT_FALSE(r.ok()) << option;
    EXPECT_NE(r.status().message().find(option), std::string::npos) << r.status().message();
  }
}

TEST(Config, MissingConfigFileIsAnError) {
  auto c = Parse({"--config", "/nonexistent/tierkv.toml"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--config"), std::string::npos) << c.status().message();
}

TEST(Config, HelpAsksToExit) {
  bool exit_now = false;
  std::string message;
  auto c = ParseManagerConfig({"--help"}, &exit_now, &message);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(exit_now);
  EXPECT_NE(message.find("--dram-size"), std::string::npos);
}

}  // namespace
}  // namespace tierkv

namespace tierkv {
namespace {

TEST(Config, EvictionPolicy) {
  auto def = Parse({});
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->store.evict_policy, EvictPolicy::kS3Fifo);
  auto lru = Parse({"--evict-policy", "lru"});
  ASSERT_TRUE(lru.ok());
  EXPECT_EQ(lru->store.evict_policy, EvictPolicy::kLru);
  auto bad = Parse({"--evict-policy", "random"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--evict-policy"), std::string::npos);
}

TEST(Config, ClusterModeFlags) {
  auto standalone = Parse({});
  ASSERT_TRUE(standalone.ok());
  EXPECT_FALSE(standalone->cluster.enabled());

  auto c = Parse({"--etcd-endpoints", "http://10.0.0.1:2379, 10.0.0.2:2379", "--cluster-name",
                  "inference", "--node-id", "cache-a", "--addr", "10.0.0.1:50055", "--data-addr",
                  "10.0.0.1:50056", "--membership-ttl-secs", "12"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->cluster.enabled());
  EXPECT_EQ(c->cluster.etcd_endpoints,
            (std::vector<std::string>{"http://10.0.0.1:2379", "10.0.0.2:2379"}));
  EXPECT_EQ(c->cluster.cluster_name, "inference");
  EXPECT_EQ(c->cluster.advertise_addr, "10.0.0.1:50055");  // defaults to --addr
  EXPECT_EQ(c->cluster.ttl_secs, 12);
  EXPECT_EQ(c->cluster.stall_ms, 3000);
  EXPECT_EQ(c->cluster.on_fence, "rejoin");
  EXPECT_FALSE(c->cluster.rank_given);
  auto ranked = Parse({"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--rank", "3",
                       "--peer-advertise-addr", "proxy:9"});
  ASSERT_TRUE(ranked.ok()) << ranked.status().ToString();
  EXPECT_TRUE(ranked->cluster.rank_given);
  EXPECT_EQ(ranked->cluster.advertise_addr, "proxy:9");
  EXPECT_EQ(ranked->cluster.scope_kind, "all");
  EXPECT_EQ(ranked->store.journal_bytes, 16u << 20);  // the journal is on in cluster mode
  EXPECT_EQ(standalone->store.journal_bytes, 0u);

  const std::string n1 = "tierkv:v1:" + std::string(64, 'b'),
                    n2 = "tierkv:v1:" + std::string(64, 'a');
  auto scoped =
      Parse({"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-namespace", n1,
             "--metadata-namespace", n2, "--metadata-namespace", n1});
  ASSERT_TRUE(scoped.ok()) << scoped.status().ToString();
  EXPECT_EQ(scoped->cluster.scope_kind, "exact");
  EXPECT_EQ(scoped->cluster.scope_namespaces,
            (std::vector<std::string>{n2, n1}));  // sorted, distinct
  auto empty =
      Parse({"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-empty-scope"});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->cluster.scope_kind, "empty");

  // Remote reads: the transfer budget defaults to half the DRAM pool.
  EXPECT_EQ(ranked->cluster.transfer_budget, ranked->dram_size / 2);
  EXPECT_EQ(ranked->cluster.grant_timeout_ms, 30000);
  EXPECT_EQ(ranked->cluster.data_connections, 4u);
  EXPECT_TRUE(ranked->cluster.remote_lookahead);
  EXPECT_EQ(ranked->cluster.remote_authorize_via, "data");
  auto transfer = Parse({"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--transfer-budget",
                         "3MiB", "--transfer-grant-timeout-ms", "500", "--data-connections", "2",
                         "--remote-read-lookahead", "false", "--remote-authorize-via", "grpc"});
  ASSERT_TRUE(transfer.ok()) << transfer.status().ToString();
  EXPECT_EQ(transfer->cluster.transfer_budget, 3u << 20);
  EXPECT_EQ(transfer->cluster.grant_timeout_ms, 500);
  EXPECT_EQ(transfer->cluster.data_connections, 2u);
  EXPECT_FALSE(transfer->cluster.remote_lookahead);
  EXPECT_EQ(transfer->cluster.remote_authorize_via, "grpc");
  EXPECT_FALSE(Parse({"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1",
                      "--remote-authorize-via", "udp"})
                   .ok());
}

TEST(Config, InvalidClusterFlagsNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string text;
  };
  const std::vector<Case> cases = {
      {{"--etcd-endpoints", "e:2379"}, "needs --addr"},
      {{"--addr", "127.0.0.1:1"}, "need --etcd-endpoints"},
      {{"--etcd-endpoints", "e:2379,,f:2379", "--addr", "127.0.0.1:1"}, "empty entry"},
      {{"--etcd-endpoints", "e:2379", "--addr", "nope"}, "--addr"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--membership-ttl-secs", "1"},
       "--membership-ttl-secs"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--cluster-name", "a/b"},
       "--cluster-name"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--node-id", "x/y"}, "--node-id"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-namespace", "llama"},
       "--metadata-namespace"},
      // An empty value (an unset shell variable) is not "every namespace".
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-namespace", ""},
       "--metadata-namespace '' is not a storage namespace"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-namespace",
        "tierkv:v1:" + std::string(64, 'a'), "--metadata-namespace", ""},
       "--metadata-namespace '' is not a storage namespace"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--metadata-empty-scope",
        "--metadata-namespace", "tierkv:v1:" + std::string(64, 'a')},
       "exclude each other"},
      {{"--metadata-empty-scope"}, "need --etcd-endpoints"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--inventory-stream-coalesce-ms",
        "6"},
       "--inventory-stream-coalesce-ms"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--inventory-journal-bytes", "1k"},
       "--inventory-journal-bytes"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--inventory-stall-ms", "1000"},
       "--inventory-stall-ms"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--peer-max-connections", "1"},
       "--peer-max-connections"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--on-fence", "retry"},
       "--on-fence"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--peer-handshake-timeout-ms", "0"},
       "--peer-handshake-timeout-ms"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--peer-idle-timeout-ms", "10"},
       "--peer-idle-timeout-ms"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--transfer-budget", "0"},
       "--transfer-budget"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--transfer-budget", "lots"},
       "--transfer-budget"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--transfer-grant-timeout-ms", "5"},
       "--transfer-grant-timeout-ms"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--data-connections", "0"},
       "--data-connections"},
      {{"--etcd-endpoints", "e:2379", "--addr", "127.0.0.1:1", "--peer-tls-cert", "a.crt"},
       "go together"},
      {{"--peer-tls-cert", "a.crt", "--peer-tls-key", "a.key", "--peer-tls-ca", "ca.crt"},
       "need --etcd-endpoints"},
  };
  for (const Case& k : cases) {
    auto c = Parse(k.args);
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.text), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace tierkv
