// tierkv_cluster_soak: real etcd and several managers with DRAM and SSD
// tiers, clients on every manager for a bounded time, while in turn one
// manager is SIGKILLed and restarted on its SSD tier, drained by a drain job
// (the whole node, its SSD segment, its DRAM segment, in turn), paused, or
// stopped gracefully (exit 0, member record gone at once) and restarted, or
// etcd is paused briefly, or one manager's peer port is cut off from the
// others (a partition that drops packets), or etcd is paused long enough to
// fence every manager (a quorum loss); then checks.
//
//   tierkv_cluster_soak [--seconds 120] [--managers 3] [--clients 6] [--max-rss-mib N]
//                       [--peer-tls] [--no-chaos] [--chaos STEP,...]
//
// Each client thread has a home manager. It puts immutable objects there
// (removing its oldest ones from every manager as it goes), upserts a few
// mutable ones there, and reads, batch reads and looks them up on any manager,
// so most reads are remote reads through source grants. Every value is derived
// from its key and version, so every byte read is checked. Failures of a
// manager while it is stopped or restarting are expected; any other error,
// wrong bytes, or a key never put that "exists" fail the run.
//
// The chaos stops for the last fifth of the run. At the end, once every view
// is complete and fenced, and every manager serves exactly one inventory
// stream to each other one (none left behind by a killed requester):
// - every immutable object put after the last kill (and not removed) reads
//   back whole from its home and from another manager: a drain moves objects,
//   it never loses them;
// - no grant is left on any owner, none awaits release on any requester, and
//   no bytes stay reserved;
// - every tenant can be removed whole without force (nothing stays leased or
//   pinned), after which no DRAM stays allocated;
// - every manager still serves, and its RSS stayed bounded.
// Exit status 0 only when all hold.
#include "cluster_soak.h"

#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.h"
#include "etcd_process.h"
#include "pki.h"
#include "tierkv/client.h"
#include "wait_for.h"

namespace tierkv::cluster_soak {
namespace {

using bench::NowSeconds;
using Json = nlohmann::json;
using testing::WaitFor;

constexpr uint64_t kPoolBytes = 64ull << 20;

struct Options {
  double seconds = 120;
  int managers = 3;
  int clients = 6;
  bool chaos = true;
  // The disruptions to take turns (kChaosSteps names them); empty: all.
  std::vector<std::string> only;
  // The most resident memory a manager may reach: its pool, gRPC and the
  // rest (a sanitizer build needs more: --max-rss-mib).
  uint64_t max_rss = kPoolBytes + (448ull << 20);
  bool peer_tls = false;  // mutual TLS on peer gRPC and the data channel
};

std::string RestOf(Member& m) {
  std::lock_guard<std::mutex> lock(m.mu);
  return m.proc ? m.proc->rest() : "";
}

Json GetJson(const std::string& rest, const std::string& path) {
  httplib::Client http(rest);
  http.set_read_timeout(10, 0);
  auto res = http.Get(path);
  if (!res) return Json();
  Json j = Json::parse(res->body, nullptr, false);
  return j.is_discarded() ? Json() : j;
}

std::string Post(const std::string& rest, const std::string& path, const std::string& body) {
  httplib::Client http(rest);
  http.set_read_timeout(35, 0);
  auto res = http.Post(path, body, "application/json");
  return res ? res->body : "";
}

int64_t Metric(Member& m, const std::string& series) {
  std::lock_guard<std::mutex> lock(m.mu);
  return m.proc ? testing::ScrapeMetric(*m.proc, series) : -1;
}

// Starts member `m` with its arguments; false (and why on stderr) when it
// cannot.
bool Start(Member& m) {
  std::string why;
  auto proc = testing::ManagerProcess::TryStart(m.args, &why);
  if (!proc) {
    std::fprintf(stderr, "cluster soak: %s does not start: %s\n", m.id.c_str(), why.c_str());
    return false;
  }
  std::lock_guard<std::mutex> lock(m.mu);
  m.proc = std::move(proc);
  m.uds = m.proc->uds();
  ++m.epoch;
  m.up = true;
  return true;
}

bool Listed(Shared& s, const std::string& id) {
  for (auto& other : s.members) {
    if (other->id == id || !other->up) continue;
    Json j = GetJson(RestOf(*other), "/cluster/members");
    if (!j.is_object()) return true;
    for (const auto& e : j["members"]) {
      if (e.value("node_id", "") == id) return true;
    }
  }
  return false;
}

// Stops member `i` with `sig` and starts it again on the same node id, peer
// port and SSD directory once the other managers no longer list the old
// incarnation. SIGKILL: that takes until its lease expires. SIGTERM: a
// graceful leave must exit 0 and delete the member record at once, so the
// restart waits for no lease (the wait is 5 s at most, half the TTL). Both
// lose what was only in DRAM, so both count as kills.
bool Restart(Shared& s, int i, int sig) {
  Member& m = *s.members[i];
  ++s.kills;
  int status = 0;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.up = false;
    ++m.epoch;
    status = m.proc->Stop(sig);
    m.proc.reset();
  }
  if (sig == SIGTERM && status != 0) {
    std::fprintf(stderr, "cluster soak: %s exited %d on SIGTERM\n", m.id.c_str(), status);
    return false;
  }
  const int wait_ms = sig == SIGTERM ? 5000 : 30000;
  if (!WaitFor([&] { return !Listed(s, m.id); }, wait_ms)) {
    std::fprintf(stderr, "cluster soak: %s is still listed %d ms after it stopped\n", m.id.c_str(),
                 wait_ms);
    return false;
  }
  return Start(m);
}

void Pause(Member& m, double seconds) {
  pid_t pid;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    pid = m.proc->pid();
  }
  ::kill(pid, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  ::kill(pid, SIGCONT);
}

std::string Field(const std::string& line, const std::string& name) {
  const size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 1;
  return line.substr(from, line.find_first_of(" \n", from) - from);
}

// A drain job of member `i` on the coordinator: the whole node (`what` 0),
// its SSD segment (1) or its DRAM segment (2); its final summary line ("" if
// it could not be started or did not end in 120 s).
std::string Drain(Shared& s, int i, int what) {
  std::string coordinator;
  for (auto& m : s.members) {
    if (m->up && Metric(*m, "tierkv_cluster_coordinator") == 1) coordinator = RestOf(*m);
  }
  if (coordinator.empty()) return "";
  Json body = {{"node", s.members[i]->id}};
  if (what != 0) {
    for (const Json& m : GetJson(coordinator, "/cluster/members").value("members", Json::array())) {
      if (m.value("node_id", "") != s.members[i]->id) continue;
      const std::string segment =
          "rank-" + std::to_string(m.value("rank", 0u)) + (what == 1 ? "-ssd" : "-dram");
      body = {{"segment", segment}};
    }
  }
  const std::string started = Post(coordinator, "/api/v1/drain_jobs", body.dump());
  const std::string job = Field(started, "job_id");
  if (job.empty()) return "not started: " + started;
  std::string line;
  WaitFor(
      [&] {
        httplib::Client http(coordinator);
        auto res = http.Get("/api/v1/drain_jobs/query?job_id=" + job);
        line = res ? res->body : "";
        return Field(line, "state") != "running";
      },
      120000);
  return line;
}

struct ChaosLog {
  int kills = 0, restarts_failed = 0, pauses = 0, drains = 0, drains_not_done = 0;
  int graceful = 0, etcd_pauses = 0;
  int partitions = 0, partitions_unnoticed = 0;     // unnoticed: no peer saw the stream stall
  int quorum_losses = 0, quorum_not_recovered = 0;  // not recovered: a member stayed fenced
  std::vector<std::string> drain_lines;
};

int64_t SumOverOthers(Shared& s, int except, const std::string& series) {
  int64_t sum = 0;
  for (int i = 0; i < static_cast<int>(s.members.size()); ++i) {
    if (i != except) sum += std::max<int64_t>(0, Metric(*s.members[i], series));
  }
  return sum;
}

// Member `target`'s peer port drops everything for `seconds` (more than the
// 3 s --inventory-stall-ms): the others' streams from it stall and their
// views of it turn partial, then recover. False when no other manager saw a
// stall.
bool Partition(Shared& s, int target, double seconds) {
  const std::string stalls = "tierkv_inventory_requester_stalls_total";
  const int64_t before = SumOverOthers(s, target, stalls);
  s.members[target]->peer_proxy->SetMode(testing::FaultProxy::Mode::kBlackhole);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  s.members[target]->peer_proxy->SetMode(testing::FaultProxy::Mode::kPass);
  return SumOverOthers(s, target, stalls) > before;
}

// etcd answers nothing for `seconds` (more than the 4 s a registration of
// TTL 10 rides out): every manager fences, keeps serving locally, and joins
// again as a new incarnation once etcd is back. False when a manager is
// still fenced, or never joined again, 30 s after etcd came back.
bool QuorumLoss(Shared& s, testing::EtcdCluster& etcd, double seconds) {
  std::vector<int64_t> rejoins;
  for (auto& m : s.members) rejoins.push_back(Metric(*m, "tierkv_membership_rejoins_total"));
  etcd.Pause(0);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  etcd.Resume(0);
  bool ok = true;
  for (size_t i = 0; i < s.members.size(); ++i) {
    Member& m = *s.members[i];
    const bool back = WaitFor(
        [&] {
          return Metric(m, "tierkv_cluster_fenced") == 0 &&
                 Metric(m, "tierkv_membership_rejoins_total") > rejoins[i];
        },
        30000);
    if (!back) {
      std::fprintf(stderr, "cluster soak: %s did not join again after the quorum loss\n",
                   m.id.c_str());
      ok = false;
    }
  }
  return ok;
}

// One disruption every `period` seconds, in turn: a kill and restart, a
// drain (of the node, its SSD segment, its DRAM segment, in turn), a pause
// of 1 s, a graceful restart (each of the next member), a pause of etcd
// for 2 s (half the 4 s outage a registration of TTL 10 rides out: see
// KeepAliveScheduleFor), a partition of one manager's peer port for 5 s, and
// a quorum loss of 8 s, until `until`.
constexpr const char* kChaosSteps[] = {"kill",       "drain",     "pause",      "graceful",
                                       "etcd-pause", "partition", "quorum-loss"};

void Chaos(Shared& s, testing::EtcdCluster& etcd, double period, double until,
           const std::vector<std::string>& only, ChaosLog* log) {
  std::vector<int> steps;
  for (int i = 0; i < static_cast<int>(std::size(kChaosSteps)); ++i) {
    if (only.empty() || std::find(only.begin(), only.end(), kChaosSteps[i]) != only.end()) {
      steps.push_back(i);
    }
  }
  const int kSteps = static_cast<int>(steps.size());
  const int n = static_cast<int>(s.members.size());
  for (int step = 0; kSteps > 0 && NowSeconds() + period < until; ++step) {
    std::this_thread::sleep_for(std::chrono::duration<double>(period));
    const int target = (step / kSteps) % n;
    switch (steps[step % kSteps]) {
      case 5:
        ++log->partitions;
        if (!Partition(s, target, 5.0)) ++log->partitions_unnoticed;
        break;
      case 6:
        ++log->quorum_losses;
        if (!QuorumLoss(s, etcd, 8.0)) ++log->quorum_not_recovered;
        break;
      case 0:
        ++log->kills;
        if (!Restart(s, target, SIGKILL)) ++log->restarts_failed;
        break;
      case 3:
        ++log->graceful;
        if (!Restart(s, target, SIGTERM)) ++log->restarts_failed;
        break;
      case 4:
        ++log->etcd_pauses;
        etcd.Pause(0);
        std::this_thread::sleep_for(std::chrono::seconds(2));
        etcd.Resume(0);
        break;
      case 1: {
        ++log->drains;
        const std::string line = Drain(s, target, (log->drains - 1) % 3);
        log->drain_lines.push_back(line);
        // Done, and every object it still counts either moved or failed.
        auto count = [&](const char* f) {
          return std::strtoull(Field(line, f).c_str(), nullptr, 10);
        };
        if (Field(line, "state") != "done" ||
            count("objects_total") != count("objects_moved") + count("objects_failed")) {
          ++log->drains_not_done;
        }
        break;
      }
      case 2:
        ++log->pauses;
        Pause(*s.members[target], 1.0);
        break;
    }
  }
}

// Every view complete, every owner serving one stream to each other manager
// (the streams of killed and restarted requesters ended, none left behind),
// and every owner's newest change seen by every other.
bool Converge(Shared& s) {
  const int n = static_cast<int>(s.members.size());
  for (auto& m : s.members) {
    const std::string rest = RestOf(*m);
    Json j;
    if (!WaitFor(
            [&] {
              j = GetJson(rest, "/cache/metadata");
              return j.is_object() && j["owner_views"]["complete"] == n - 1 &&
                     j["streams"]["owner_streams_open"] == n - 1;
            },
            30000)) {
      std::fprintf(stderr,
                   "cluster soak: %s's views never completed or its streams never settled: "
                   "owner_views %s, streams %s\n",
                   m->id.c_str(), j.is_object() ? j["owner_views"].dump().c_str() : "?",
                   j.is_object() ? j["streams"].dump().c_str() : "?");
      return false;
    }
  }
  for (auto& owner : s.members) {
    Json fence = Json::parse(Post(RestOf(*owner), "/cache/sync", "{}"), nullptr, false);
    if (!fence.is_object() || !fence.contains("inventory_fence")) return false;
    for (auto& reader : s.members) {
      if (reader == owner) continue;
      Json body = {{"inventory_fence", fence["inventory_fence"]}, {"timeout_ms", 30000}};
      Json got =
          Json::parse(Post(RestOf(*reader), "/cache/metadata/await", body.dump()), nullptr, false);
      if (!got.is_object() || got.value("success", false) != true) {
        std::fprintf(stderr, "cluster soak: %s never covered %s\n", reader->id.c_str(),
                     owner->id.c_str());
        return false;
      }
    }
  }
  return true;
}

// Objects put after the last kill, read back from their home and from the
// next manager. Returns how many were lost (a miss) or read wrong.
uint64_t CheckSurvivors(Shared& s, const std::vector<ClientState>& states, uint64_t* checked) {
  const int n = static_cast<int>(s.members.size());
  uint64_t bad = 0;
  std::vector<std::unique_ptr<Client>> clients;
  for (auto& m : s.members) {
    auto c = Client::Connect(m->Address().first);
    if (!c.ok()) return ~0ull;
    clients.push_back(std::move(*c));
  }
  std::string buf((2u << 20) + 4096, '\0');
  for (const ClientState& st : states) {
    for (const auto& [key, where] : st.immutable) {
      if (where.kills_before != s.kills.load()) continue;
      for (int m : {where.home, (where.home + 1) % n}) {
        ++*checked;
        auto r = clients[m]->Get(key, buf.data(), buf.size(), st.tenant);
        if (!r.ok() || VersionIn(key, buf.substr(0, *r), 1) != 1) {
          if (++bad <= 5) {
            std::printf("  lost or wrong: %s on %s: %s\n", key.c_str(), s.members[m]->id.c_str(),
                        r.ok() ? "wrong bytes" : r.status().ToString().c_str());
          }
        }
      }
    }
  }
  return bad;
}

// Nothing held: no grant live or reserved on any owner, none awaiting release
// on any requester; every tenant removed whole without force, and then no
// DRAM allocated.
bool NothingHeld(Shared& s, const std::vector<ClientState>& states) {
  bool ok = true;
  for (auto& m : s.members) {
    const bool released = WaitFor(
        [&] {
          return Metric(*m, "tierkv_grants_live") == 0 &&
                 Metric(*m, "tierkv_grants_reserved_bytes") == 0 &&
                 Metric(*m, "tierkv_remote_grants_awaiting_release") == 0;
        },
        30000);
    if (!released) {
      std::printf("  %s still holds grants: live %lld, reserved %lld, awaiting release %lld\n",
                  m->id.c_str(), static_cast<long long>(Metric(*m, "tierkv_grants_live")),
                  static_cast<long long>(Metric(*m, "tierkv_grants_reserved_bytes")),
                  static_cast<long long>(Metric(*m, "tierkv_remote_grants_awaiting_release")));
      ok = false;
    }
    auto c = Client::Connect(m->Address().first);
    if (!c.ok()) return false;
    for (const ClientState& st : states) {
      RemoveAllStats last;
      const bool cleared = WaitFor(
          [&] {
            auto r = (*c)->RemoveAll(st.tenant, /*force=*/false);
            if (r.ok()) last = *r;
            return r.ok() && last.skipped == 0;
          },
          30000);
      if (!cleared) {
        std::printf("  %s: tenant %s keeps %llu objects held\n", m->id.c_str(), st.tenant.c_str(),
                    static_cast<unsigned long long>(last.skipped));
        ok = false;
      }
    }
    Json usage = GetJson(RestOf(*m), "/api/v1/capacity/usage");
    const uint64_t used = usage.is_object() ? usage["cpu"].value("used_bytes", ~0ull) : ~0ull;
    if (used != 0) {
      std::printf("  %s: %llu DRAM bytes still allocated with every tenant removed\n",
                  m->id.c_str(), static_cast<unsigned long long>(used));
      ok = false;
    }
  }
  return ok;
}

int Run(const Options& opt) {
  char tmpl[] = "/tmp/tierkv-cluster-soak-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  const std::string dir = tmpl;
  testing::EtcdCluster etcd(1);
  // One certificate for every manager, signed by the cluster's CA.
  testing::Pki pki;
  std::vector<std::string> tls;
  if (opt.peer_tls) {
    if (!pki.Ca("soak-ca") || !pki.Cert("node", "soak-ca")) {
      std::fprintf(stderr, "cluster soak: openssl could not make the peer certificates\n");
      return 2;
    }
    tls = pki.Flags("node", "soak-ca");
  }
  Shared s;
  const std::string cluster = "soak-" + std::to_string(getpid());
  for (int i = 0; i < opt.managers; ++i) {
    auto m = std::make_unique<Member>();
    m->id = "n" + std::to_string(i);
    const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
    m->peer_proxy = std::make_unique<testing::FaultProxy>(addr);
    m->args = {"--etcd-endpoints",
               etcd.endpoints(),
               "--cluster-name",
               cluster,
               "--node-id",
               m->id,
               "--addr",
               addr,
               "--peer-advertise-addr",
               m->peer_proxy->addr(),
               "--membership-ttl-secs",
               "10",
               "--dram-size",
               "64MiB",
               "--ssd-dir",
               dir + "/" + m->id,
               "--ssd-size",
               "1GiB",
               "--max-object-bytes",
               "4MiB",
               "--log-level",
               "warn"};
    m->args.insert(m->args.end(), tls.begin(), tls.end());
    if (!Start(*m)) return 1;
    s.members.push_back(std::move(m));
  }
  if (!WaitFor([&] { return Converge(s); }, 60000)) return 1;

  const double start = NowSeconds();
  const double deadline = start + opt.seconds;
  std::atomic<bool> stop{false};
  std::vector<uint64_t> peak_rss(s.members.size(), 0);
  std::thread scraper([&] {
    while (!stop) {
      for (size_t i = 0; i < s.members.size(); ++i) {
        Member& m = *s.members[i];
        std::lock_guard<std::mutex> lock(m.mu);
        if (m.proc) {
          peak_rss[i] = std::max(peak_rss[i], testing::ProcessRssBytes(m.proc->pid()));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::vector<ClientState> states(opt.clients);
  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) {
    states[i].tenant = "t" + std::to_string(i % 3);
    clients.emplace_back([&, i] { ClientLoop(i, &s, deadline, &states[i]); });
  }
  // On this thread: a manager dies with the thread that started it.
  ChaosLog chaos;
  if (opt.chaos) Chaos(s, etcd, opt.seconds / 16, start + opt.seconds * 0.8, opt.only, &chaos);
  for (auto& t : clients) t.join();
  stop = true;
  scraper.join();

  // One state per tenant is enough for NothingHeld; CheckSurvivors uses all.
  std::vector<ClientState> tenants(states.begin(), states.begin() + std::min(3, opt.clients));
  const bool converged = Converge(s);
  uint64_t checked = 0;
  const uint64_t lost = converged ? CheckSurvivors(s, states, &checked) : ~0ull;
  const bool nothing_held = converged && NothingHeld(s, tenants);
  bool serving = true;
  bool rss_ok = true;
  for (size_t i = 0; i < s.members.size(); ++i) {
    Member& m = *s.members[i];
    const bool health = GetJson(RestOf(m), "/health").is_object();
    // A pause of 1 s is well within the registration's validity (5 s).
    const bool fenced = Metric(m, "tierkv_cluster_fenced") != 0;
    serving = serving && health && !fenced;
    rss_ok = rss_ok && peak_rss[i] > 0 && peak_rss[i] < opt.max_rss;
    std::printf("  %s: peak RSS %.1f MiB, serving %s%s\n", m.id.c_str(), peak_rss[i] / 1048576.0,
                health ? "yes" : "no", fenced ? ", fenced" : "");
  }

  const Tally& t = s.tally;
  std::printf("cluster soak: %d managers, %d clients, %.0f s, %llu ops\n", opt.managers,
              opt.clients, opt.seconds, static_cast<unsigned long long>(t.ops.load()));
  std::printf(
      "  misses %llu (and %llu removes of objects a manager did not hold), no_space %llu, "
      "failures during a restart %llu, lookups unknown %llu, "
      "remote candidates %llu, older mutable versions read %llu, upserts retried %llu\n",
      static_cast<unsigned long long>(t.misses.load()),
      static_cast<unsigned long long>(t.remove_absent.load()),
      static_cast<unsigned long long>(t.no_space.load()),
      static_cast<unsigned long long>(t.down.load()),
      static_cast<unsigned long long>(t.unavailable_lookups.load()),
      static_cast<unsigned long long>(t.remote_candidates.load()),
      static_cast<unsigned long long>(t.stale_mutable.load()),
      static_cast<unsigned long long>(t.retries.load()));
  std::printf("  unexpected %llu, corrupt %llu\n",
              static_cast<unsigned long long>(t.unexpected.load()),
              static_cast<unsigned long long>(t.corrupt.load()));
  std::printf(
      "  chaos: %d kills, %d graceful restarts (%d restarts failed), %d drains (%d not done "
      "or not adding up), "
      "%d pauses, %d etcd pauses, %d partitions (%d unnoticed), %d quorum losses (%d not "
      "recovered)\n",
      chaos.kills, chaos.graceful, chaos.restarts_failed, chaos.drains, chaos.drains_not_done,
      chaos.pauses, chaos.etcd_pauses, chaos.partitions, chaos.partitions_unnoticed,
      chaos.quorum_losses, chaos.quorum_not_recovered);
  for (const std::string& line : chaos.drain_lines) std::printf("  drain: %s\n", line.c_str());
  int64_t copies_stale = 0, copies_lost = 0;
  for (auto& m : s.members) {
    copies_stale += Metric(*m, "tierkv_remote_copies_dropped_total{reason=\"stale\"}");
    copies_lost += Metric(*m, "tierkv_remote_copies_dropped_total{reason=\"owner_lost\"}");
  }
  std::printf("  copies dropped since the last restarts: %lld stale, %lld with their owner lost\n",
              static_cast<long long>(copies_stale), static_cast<long long>(copies_lost));
  std::printf("  remote fetch misses since the last restarts:");
  for (const char* reason :
       {"not_indexed", "refused", "budget", "read_failed", "local_space", "grant_slots"}) {
    int64_t sum = 0;
    for (auto& m : s.members) {
      sum += std::max<int64_t>(
          0,
          Metric(*m, std::string("tierkv_remote_fetch_misses_total{reason=\"") + reason + "\"}"));
    }
    std::printf(" %s %lld", reason, static_cast<long long>(sum));
  }
  std::printf("\n");
  std::printf("  survivors checked %llu, lost or wrong %llu; views converged %s; nothing held %s\n",
              static_cast<unsigned long long>(checked), static_cast<unsigned long long>(lost),
              converged ? "yes" : "no", nothing_held ? "yes" : "no");
  for (const std::string& e : t.samples) std::printf("  failure: %s\n", e.c_str());
  const bool ok = t.unexpected == 0 && t.corrupt == 0 && chaos.restarts_failed == 0 &&
                  chaos.drains_not_done == 0 && chaos.partitions_unnoticed == 0 &&
                  chaos.quorum_not_recovered == 0 && converged && lost == 0 && checked > 0 &&
                  nothing_held && serving && rss_ok && t.remote_candidates > 0;
  std::printf("cluster soak: %s\n", ok ? "PASS" : "FAIL");
  for (auto& m : s.members) {
    std::lock_guard<std::mutex> lock(m->mu);
    m->proc.reset();
  }
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace tierkv::cluster_soak

int main(int argc, char** argv) {
  tierkv::cluster_soak::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      opt.seconds = std::stod(argv[++i]);
    } else if (a == "--managers" && i + 1 < argc) {
      opt.managers = std::max(2, std::stoi(argv[++i]));
    } else if (a == "--clients" && i + 1 < argc) {
      opt.clients = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--max-rss-mib" && i + 1 < argc) {
      opt.max_rss = std::stoull(argv[++i]) << 20;
    } else if (a == "--peer-tls") {
      opt.peer_tls = true;
    } else if (a == "--no-chaos") {
      opt.chaos = false;
    } else if (a == "--chaos" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        opt.only.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
      for (const std::string& name : opt.only) {
        if (std::find(std::begin(tierkv::cluster_soak::kChaosSteps),
                      std::end(tierkv::cluster_soak::kChaosSteps),
                      name) == std::end(tierkv::cluster_soak::kChaosSteps)) {
          std::fprintf(stderr, "tierkv_cluster_soak: unknown disruption %s\n", name.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_cluster_soak [--seconds S] [--managers N] [--clients N] "
                   "[--max-rss-mib N] [--peer-tls] [--no-chaos] [--chaos kill,drain,pause,"
                   "graceful,etcd-pause,partition,quorum-loss]\n");
      return 2;
    }
  }
  return tierkv::cluster_soak::Run(opt);
}
