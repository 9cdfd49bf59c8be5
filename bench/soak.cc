// tierkv_soak: many clients against one real manager for a bounded time, while
// the REST API is scraped and the KV event stream is followed; then checks.
//
//   tierkv_soak [--seconds 120] [--clients 16] [--dram-size 256MiB] [--misbehave]
//
// With --misbehave, misbehaving clients run alongside (soak_misbehave.h): the
// run must still end with zero corrupt reads and zero unexpected errors for the
// well-behaved clients, and no foreign id ever accepted.
//
// Each client thread owns its keys and remembers which version of each key it
// last wrote; every value is derived from (key, version), so every read is
// checked byte for byte. Objects may vanish (eviction under a pool smaller than
// the working set): NOT_FOUND and NO_SPACE are expected, nothing else is. At
// the end it checks: no unexpected error, no corrupted read, every stored
// object reads back intact, the manager's RSS stayed bounded, every operation
// counter satisfies requests = successes + failures + not_found, and the event
// stream's sequence never went backwards. Exit status 0 only when all hold.
#include <httplib.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "bench_util.h"
#include "common/units.h"
#include "manager_process.h"
#include "soak_misbehave.h"
#include "tierkv/client.h"

namespace tierkv::soak {
namespace {

using bench::NowSeconds;

struct Options {
  double seconds = 120;
  int clients = 16;
  std::string dram_size = "256MiB";
  bool misbehave = false;
};

// The bytes of `key` at `version`: deterministic, so readers can verify.
std::string ValueOf(const std::string& key, uint64_t version, size_t size) {
  std::string v(size, '\0');
  uint64_t x = XXH3_64bits_withSeed(key.data(), key.size(), version) | 1;
  for (size_t i = 0; i < size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, size - i));
  }
  return v;
}

struct Tally {
  std::atomic<uint64_t> ops{0}, unexpected{0}, corrupt{0}, no_space{0}, misses{0};
  std::mutex mu;
  std::vector<std::string> samples;  // first few unexpected errors
  void Unexpected(const std::string& what) {
    ++unexpected;
    std::lock_guard<std::mutex> lock(mu);
    if (samples.size() < 10) samples.push_back(what);
  }
};

bool Expected(Code c) { return c == Code::kOk || c == Code::kNotFound || c == Code::kNoSpace; }

void ClientLoop(int id, const std::string& address, double deadline, Tally* t,
                std::map<std::string, std::pair<uint64_t, size_t>>* final_state) {
  auto c = Client::Connect(address);
  if (!c.ok()) {
    t->Unexpected("connect: " + c.status().ToString());
    return;
  }
  std::mt19937_64 rng(id * 7919 + 1);
  std::unordered_map<std::string, std::pair<uint64_t, size_t>> mine;  // key -> (version, size)
  const std::string tenant = "soak-" + std::to_string(id % 4);
  auto check = [&](const std::string& what, const Status& st) {
    if (st.code() == Code::kNoSpace) ++t->no_space;
    if (st.code() == Code::kNotFound) ++t->misses;
    if (!Expected(st.code())) t->Unexpected(what + ": " + st.ToString());
  };
  auto verify = [&](const std::string& key, const std::string& got) {
    auto it = mine.find(key);
    if (it == mine.end() || got != ValueOf(key, it->second.first, it->second.second)) {
      ++t->corrupt;
      t->Unexpected("corrupt value for " + key);
    }
  };
  std::string buf(512 << 10, '\0');
  uint64_t version = 0;
  while (NowSeconds() < deadline) {
    const std::string key = "c" + std::to_string(id) + "/k" + std::to_string(rng() % 200);
    const size_t size = 1024 + rng() % (256 << 10);
    const int op = static_cast<int>(rng() % 10);
    ++t->ops;
    if (op <= 2) {  // upsert a new version
      ++version;
      const std::string v = ValueOf(key, version, size);
      Status st = (*c)->Upsert(key, v, {tenant, {}});
      check("upsert", st);
      if (st.ok()) mine[key] = {version, size};
    } else if (op <= 5) {  // get and verify
      auto r = (*c)->Get(key, buf.data(), buf.size(), tenant);
      if (r.ok()) {
        verify(key, buf.substr(0, *r));
      } else {
        check("get", r.status());
      }
    } else if (op == 6) {
      Status st = (*c)->Remove(key, tenant);
      check("remove", st);
      if (st.ok() || st.code() == Code::kNotFound) mine.erase(key);
    } else if (op == 7) {  // batch put of fresh keys
      std::vector<std::string> keys, values;
      std::vector<PutItem> items;
      for (int i = 0; i < 8; ++i) {
        keys.push_back("c" + std::to_string(id) + "/b" + std::to_string(rng() % 100));
      }
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      ++version;
      for (const auto& k : keys) values.push_back(ValueOf(k, version, 4096));
      for (size_t i = 0; i < keys.size(); ++i) {
        items.push_back({keys[i], values[i].data(), values[i].size(), {}});
      }
      auto st = (*c)->BatchPut(items, tenant, /*upsert=*/true);
      for (size_t i = 0; i < st.size(); ++i) {
        check("batch_put", st[i]);
        if (st[i].ok()) mine[keys[i]] = {version, 4096};
      }
    } else if (op == 8) {  // batch get and verify
      std::vector<std::string> keys;
      for (int i = 0; i < 8; ++i) {
        keys.push_back("c" + std::to_string(id) + "/b" + std::to_string(rng() % 100));
      }
      std::vector<std::string_view> views(keys.begin(), keys.end());
      auto got = (*c)->BatchGet(views, tenant);
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i].ok()) {
          verify(keys[i], *got[i]);
        } else {
          check("batch_get", got[i].status());
        }
      }
    } else {
      std::vector<std::string> keys = {key, key + "x"};
      std::vector<std::string_view> views(keys.begin(), keys.end());
      for (const Status& st : (*c)->BatchExist(views, tenant)) check("batch_exist", st);
    }
  }
  // Final pass: everything this client believes stored reads back intact (or
  // was evicted: a miss).
  for (const auto& [key, ver] : mine) {
    std::string v(ver.second, '\0');
    auto r = (*c)->Get(key, v.data(), v.size(), tenant);
    if (r.ok()) {
      verify(key, v.substr(0, *r));
    } else {
      check("final get", r.status());
    }
  }
  static std::mutex final_mu;
  std::lock_guard<std::mutex> lock(final_mu);
  for (const auto& [k, v] : mine) (*final_state)[k] = v;
}

int Run(const Options& opt) {
  const std::string events = "ipc:///tmp/tierkv-soak-" + std::to_string(getpid());
  testing::UnlinkAtExit unlink_events(events.substr(std::string("ipc://").size()));
  testing::ManagerProcess manager({"--dram-size", opt.dram_size, "--kv-events-endpoint", events,
                                   "--log-level", "error", "--handshake-timeout-ms", "1000",
                                   "--metrics-request-timeout-ms", "5000"});
  const double deadline = NowSeconds() + opt.seconds;
  std::atomic<bool> stop{false};
  // Event follower: sequence must never go backwards (gaps are allowed and
  // counted: drops are visible by design).
  std::atomic<uint64_t> event_msgs{0}, event_gaps{0}, seq_backwards{0};
  std::thread follower([&] {
    zmq::context_t ctx;
    zmq::socket_t sub(ctx, zmq::socket_type::sub);
    sub.set(zmq::sockopt::subscribe, "");
    sub.set(zmq::sockopt::rcvtimeo, 200);
    sub.connect(events);
    uint64_t last = 0;
    while (!stop) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sub, std::back_inserter(frames)) || frames.size() != 3) continue;
      uint64_t seq = 0;
      for (int i = 0; i < 8; ++i)
        seq = (seq << 8) | static_cast<const uint8_t*>(frames[1].data())[i];
      if (last != 0 && seq <= last) ++seq_backwards;
      if (last != 0 && seq > last + 1) ++event_gaps;
      last = seq;
      ++event_msgs;
    }
  });
  // Scraper: /metrics every 100 ms; track the manager's peak RSS.
  std::atomic<uint64_t> scrapes{0}, scrape_errors{0}, peak_rss{0};
  std::thread scraper([&] {
    httplib::Client http(manager.rest());
    while (!stop) {
      auto res = http.Get("/metrics");
      if (res && res->status == 200) {
        ++scrapes;
      } else {
        ++scrape_errors;
      }
      peak_rss = std::max<uint64_t>(peak_rss, testing::ProcessRssBytes(manager.pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  Tally tally;
  std::map<std::string, std::pair<uint64_t, size_t>> final_state;
  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) {
    const std::string address = i % 4 == 3 ? manager.tcp() : manager.uds();
    clients.emplace_back(ClientLoop, i, address, deadline, &tally, &final_state);
  }
  MisbehaveTally bad;
  std::thread misbehaving;
  if (opt.misbehave) {
    misbehaving = std::thread(
        [&] { Misbehave(manager.uds(), manager.tcp(), manager.rest(), deadline, &bad); });
  }
  for (auto& t : clients) t.join();
  if (misbehaving.joinable()) misbehaving.join();
  stop = true;
  scraper.join();
  follower.join();

  // Counters add up.
  httplib::Client http(manager.rest());
  auto summary = http.Get("/metrics/summary");
  std::map<std::string, uint64_t> s;
  if (summary) {
    std::istringstream in(summary->body);
    std::string kv;
    while (in >> kv) {
      const size_t eq = kv.find('=');
      if (eq != std::string::npos && kv.find('/') == std::string::npos) {
        s[kv.substr(0, eq)] = std::stoull(kv.substr(eq + 1));
      }
    }
  }
  int counter_mismatch = 0;
  for (const auto& [k, v] : s) {
    if (k.size() < 4 || k.substr(k.size() - 4) != "_req") continue;
    const std::string op = k.substr(0, k.size() - 4);
    const uint64_t sum = s[op + "_success"] + s[op + "_fail"] +
                         (s.count(op + "_not_found") ? s[op + "_not_found"] : 0);
    if (sum != v) {
      ++counter_mismatch;
      std::fprintf(stderr, "counter mismatch: %s_req=%llu != %llu\n", op.c_str(),
                   static_cast<unsigned long long>(v), static_cast<unsigned long long>(sum));
    }
  }
  const Result<uint64_t> pool_size = ParseByteSize(opt.dram_size);
  const uint64_t pool = pool_size.ok() ? *pool_size : 0;
  const uint64_t rss_limit = pool + (256ull << 20);
  const bool rss_ok = peak_rss.load() > 0 && peak_rss.load() < rss_limit;

  std::printf("soak: %d clients, %.0f s, %llu ops (%.0f ops/s)\n", opt.clients, opt.seconds,
              static_cast<unsigned long long>(tally.ops.load()), tally.ops.load() / opt.seconds);
  std::printf("  misses %llu, no_space %llu, unexpected %llu, corrupt %llu\n",
              static_cast<unsigned long long>(tally.misses.load()),
              static_cast<unsigned long long>(tally.no_space.load()),
              static_cast<unsigned long long>(tally.unexpected.load()),
              static_cast<unsigned long long>(tally.corrupt.load()));
  std::printf("  scrapes %llu (errors %llu), event messages %llu (gaps %llu, backwards %llu)\n",
              static_cast<unsigned long long>(scrapes.load()),
              static_cast<unsigned long long>(scrape_errors.load()),
              static_cast<unsigned long long>(event_msgs.load()),
              static_cast<unsigned long long>(event_gaps.load()),
              static_cast<unsigned long long>(seq_backwards.load()));
  std::printf("  manager peak RSS %.1f MiB (limit %.1f MiB), counters checked %zu, mismatches %d\n",
              peak_rss.load() / 1048576.0, rss_limit / 1048576.0, s.size(), counter_mismatch);
  if (opt.misbehave) {
    std::printf(
        "  misbehaving: %llu foreign/stale ids (%llu accepted), %llu metric reports, "
        "%llu idle connections, %llu trickled header lines, %llu errors\n",
        static_cast<unsigned long long>(bad.foreign_ids.load()),
        static_cast<unsigned long long>(bad.foreign_accepted.load()),
        static_cast<unsigned long long>(bad.reports.load()),
        static_cast<unsigned long long>(bad.idle_conns.load()),
        static_cast<unsigned long long>(bad.trickle_lines.load()),
        static_cast<unsigned long long>(bad.errors.load()));
  }
  for (const std::string& e : tally.samples) std::printf("  unexpected: %s\n", e.c_str());
  const bool ok =
      tally.unexpected == 0 && tally.corrupt == 0 && scrape_errors == 0 && seq_backwards == 0 &&
      counter_mismatch == 0 && rss_ok && !s.empty() && event_msgs > 0 &&
      (!opt.misbehave ||
       (bad.foreign_accepted == 0 && bad.errors == 0 && bad.foreign_ids > 0 && bad.reports > 0));
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace tierkv::soak

int main(int argc, char** argv) {
  tierkv::soak::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      opt.seconds = std::stod(argv[++i]);
    } else if (a == "--clients" && i + 1 < argc) {
      opt.clients = std::stoi(argv[++i]);
    } else if (a == "--dram-size" && i + 1 < argc) {
      opt.dram_size = argv[++i];
    } else if (a == "--misbehave") {
      opt.misbehave = true;
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_soak [--seconds S] [--clients N] [--dram-size SIZE] "
                   "[--misbehave]\n");
      return 2;
    }
  }
  return tierkv::soak::Run(opt);
}
