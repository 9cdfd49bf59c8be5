// tierkv_inventory_bench: the peer inventory streams and the global index.
//
//   tierkv_inventory_bench [--objects 1000000] [--samples 300] [--json PATH]
//                          [--rounds 3] [--put-rate-only]
//
// 1. Cold start: three managers each put objects/3 objects, then a fourth
//    starts; the time until its /cache/metadata reports complete coverage of
//    all of them, and the index bytes per object.
// 2. Delta latency: a put on one manager until Exist finds it through another
//    (polled over its socket), median and p99, with --inventory-stream-
//    coalesce-ms 0 and 2, puts back to back and after 5 ms of quiet.
// 3. Owner put rate with 4 subscribed peers against the same owner with none,
//    `rounds` rounds of each in turn (the peers stopped between rounds); once
//    with the client and the owner's sessions spinning (the defaults) and
//    once with both sleeping between a request and its answer; and once,
//    spinning, with the peers (and etcd) on one core and the owner and its
//    client on the other, as the peers would be on hosts of their own.
#include <httplib.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cluster_member.h"
#include "etcd_process.h"
#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

using testing::EtcdCluster;
using testing::ManagerProcess;

std::unique_ptr<ManagerProcess> Start(const EtcdCluster& etcd, const std::string& cluster,
                                      const std::string& id, std::vector<std::string> extra = {}) {
  return StartMember(etcd, cluster, id, std::move(extra));
}

nlohmann::json Coverage(const ManagerProcess& m) {
  httplib::Client http(m.rest());
  auto res = http.Get("/cache/metadata");
  return res ? nlohmann::json::parse(res->body, nullptr, false) : nlohmann::json();
}

void PutMany(const ManagerProcess& m, const std::string& prefix, uint64_t n) {
  auto c = Client::Connect(m.uds());
  if (!c.ok()) return;
  const std::string value(64, 'v');
  std::vector<std::string> keys;
  for (uint64_t at = 0; at < n; at += 4096) {
    keys.clear();
    for (uint64_t i = at; i < std::min(n, at + 4096); ++i) {
      char k[80];
      std::snprintf(k, sizeof k, "%s%016llx%048llx", prefix.c_str(),
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(i * 7919));
      keys.emplace_back(k);
    }
    std::vector<PutItem> items;
    for (const std::string& k : keys) items.push_back({k, value.data(), value.size(), ""});
    (void)(*c)->BatchPut(items);
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * v.size()))];
}

// Put on `owner`, then spin on Exist at `viewer` until it is found; the next
// put after `quiet_us` (0: at once, so it usually falls in the slot of the
// batch that carried the previous one and waits for the next slot).
std::vector<double> DeltaLatency(const ManagerProcess& owner, const ManagerProcess& viewer,
                                 int samples, useconds_t quiet_us) {
  auto put = Client::Connect(owner.uds());
  auto look = Client::Connect(viewer.uds());
  std::vector<double> out;
  if (!put.ok() || !look.ok()) return out;
  for (int i = 0; i < samples; ++i) {
    const std::string key =
        "lat" + std::to_string(getpid()) + "-" + std::to_string(quiet_us) + "-" + std::to_string(i);
    const double t0 = NowSeconds();
    if (!(*put)->Put(key, "v").ok()) continue;
    // Poll with a short pause: on a small machine a spinning poller would
    // take the CPU the owner's stream needs.
    while (!(*look)->Exist(key).ok() && NowSeconds() - t0 < 5) usleep(20);
    out.push_back(NowSeconds() - t0);
    if (quiet_us > 0) usleep(quiet_us);
  }
  return out;
}

// CPU seconds (user + system) `pid` has used so far.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string f;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}

// Every thread of `pid` at the lowest CPU priority (a peer that stands for
// another host does not take the owner's CPU on this one-host bench).
void Deprioritize(pid_t pid) {
  for (const auto& t :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(std::stoi(t.path().filename().string())), 19);
  }
}

// The three ways the owner put rate is measured (main, below).
enum class PutRateArm { kShared, kSharedNoSpin, kPeersApart };

// Binds the calling thread, and the processes it starts from now on, to
// `cpu`; -1 gives it back the CPUs it had before the first call.
void PinThisThread(int cpu) {
  static const cpu_set_t original = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) std::perror("sched_getaffinity");
    return set;
  }();
  cpu_set_t set = original;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}

// 4 KiB puts per second from one client for about a second, then removes
// them. `spin`: whether the client and the owner's sessions busy-poll (the
// defaults) or sleep between a request and its answer.
double PutRate(const ManagerProcess& m, const std::string& prefix, bool spin = true) {
  ClientOptions o;
  if (!spin) o.spin_us = 0;
  auto c = Client::Connect(m.uds(), o);
  if (!c.ok()) return 0;
  const std::string value(4096, 'p');
  const double t0 = NowSeconds();
  uint64_t n = 0;
  while (NowSeconds() - t0 < 1.0) {
    (void)(*c)->Put(prefix + std::to_string(n++), value);
  }
  const double rate = n / (NowSeconds() - t0);
  (void)(*c)->RemoveAll(kDefaultTenant, true);  // the next rounds start from the same pool
  return rate;
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  using namespace tierkv;
  using namespace tierkv::bench;
  uint64_t objects = 1000000;
  int samples = 300;
  int rounds = 3;
  bool put_rate_only = false;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--objects" && i + 1 < argc) {
      objects = std::stoull(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--put-rate-only") {
      put_rate_only = true;
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::stoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_inventory_bench [--objects N] [--samples S] [--rounds R] "
                   "[--put-rate-only]\n");
      return 2;
    }
  }
  std::vector<Ratio> ratios;
  if (!put_rate_only) {
    EtcdCluster etcd(1);
    const std::string cluster = "ibench" + std::to_string(getpid());
    std::vector<std::unique_ptr<ManagerProcess>> owners;
    for (int i = 0; i < 3; ++i) {
      owners.push_back(Start(etcd, cluster, "o" + std::to_string(i), {"--dram-size", "2GiB"}));
      PutMany(*owners.back(), "o" + std::to_string(i) + "-", objects / 3);
    }
    const double t0 = NowSeconds();
    auto cold = Start(etcd, cluster, "cold");
    nlohmann::json c;
    for (;;) {
      c = Coverage(*cold);
      if (c.is_object() && c["coverage"] == "complete" &&
          c["index"]["entries"].get<uint64_t>() >= 3 * (objects / 3)) {
        break;
      }
      if (NowSeconds() - t0 > 300) break;
      usleep(2000);
    }
    const double secs = NowSeconds() - t0;
    const uint64_t entries = c["index"]["entries"].get<uint64_t>();
    const double per = entries ? double(c["index"]["bytes"].get<uint64_t>()) / entries : 0;
    std::printf(
        "cold start: %llu objects of 3 owners covered after %.2f s (process start "
        "included); index %.0f bytes per object\n",
        static_cast<unsigned long long>(entries), secs, per);
    ratios.push_back({"cold start to full coverage, seconds", secs, 0});
    ratios.push_back({"index bytes per object (target <= 128)", per, 0});
  }
  for (int coalesce : {0, 2}) {
    if (put_rate_only) break;
    EtcdCluster etcd(1);
    const std::string cluster = "lbench" + std::to_string(getpid()) + std::to_string(coalesce);
    const std::vector<std::string> flags = {"--inventory-stream-coalesce-ms",
                                            std::to_string(coalesce)};
    auto a = Start(etcd, cluster, "a", flags);
    auto b = Start(etcd, cluster, "b", flags);
    while (Coverage(*b)["coverage"] != "complete") usleep(2000);
    for (const bool quiet : {false, true}) {
      const std::vector<double> lat = DeltaLatency(*a, *b, samples, quiet ? 5000 : 0);
      const std::string how = quiet ? "after 5 ms of quiet" : "back to back";
      std::printf("delta latency (coalesce %d ms, %s): p50 %.0f us, p99 %.0f us over %zu puts\n",
                  coalesce, how.c_str(), Percentile(lat, 50) * 1e6, Percentile(lat, 99) * 1e6,
                  lat.size());
      const std::string label = "coalesce " + std::to_string(coalesce) + ", " + how;
      ratios.push_back({"delta p50 us, " + label, Percentile(lat, 50) * 1e6, 0});
      ratios.push_back({"delta p99 us, " + label, Percentile(lat, 99) * 1e6, 0});
    }
  }
  cpu_set_t usable;
  CPU_ZERO(&usable);
  const bool two_cores = sched_getaffinity(0, sizeof usable, &usable) == 0 &&
                         CPU_ISSET(0, &usable) && CPU_ISSET(1, &usable);
  for (const PutRateArm arm :
       {PutRateArm::kShared, PutRateArm::kSharedNoSpin, PutRateArm::kPeersApart}) {
    // With spinning (the defaults), a waiting thread yields between polls, and
    // a yield can hand the core to a peer process for a scheduler tick even
    // at the lowest priority; without it, the client and the owner's sessions
    // sleep and are woken ahead of the deprioritized peers. The second run
    // shows the owner's own cost of feeding four streams. The third stands for
    // separate hosts: the owner, its streams and the client on core 0 in both
    // halves of each round, etcd and the peers on core 1, so the peers' work
    // does not count against the owner but the owner's work for them does.
    // Three rounds, each the owner alone, then with four peers that are
    // stopped at its end; the median of the per-round ratios.
    const bool spin = arm != PutRateArm::kSharedNoSpin;
    const bool apart = arm == PutRateArm::kPeersApart;
    if (apart && !two_cores) {
      std::printf("owner put rate with the peers on a core of their own: needs 2 cores\n");
      continue;
    }
    if (apart) PinThisThread(1);  // inherited by etcd
    EtcdCluster etcd(1);
    const std::string cluster = "pbench" + std::to_string(getpid()) + std::to_string(int(arm));
    std::vector<std::string> flags = {"--dram-size", "2GiB"};
    if (!spin) flags.insert(flags.end(), {"--spin-us", "0"});
    if (apart) PinThisThread(0);  // the owner, and this thread as its client
    auto owner = Start(etcd, cluster, "owner", flags);
    (void)PutRate(*owner, "warm", spin);
    std::vector<double> per_round;
    for (int round = 0; round < rounds; ++round) {
      const std::string r = std::to_string(round);
      const double alone_cpu0 = CpuSeconds(owner->pid());
      const double alone = PutRate(*owner, "alone" + r + "-", spin);
      const double alone_cpu = CpuSeconds(owner->pid()) - alone_cpu0;
      std::vector<std::unique_ptr<ManagerProcess>> peers;
      if (apart) PinThisThread(1);
      for (int i = 0; i < 4; ++i) {
        peers.push_back(Start(etcd, cluster, "p" + r + "-" + std::to_string(i)));
      }
      if (apart) PinThisThread(0);
      for (auto& p : peers) {
        while (Coverage(*p)["coverage"] != "complete") usleep(2000);
        Deprioritize(p->pid());
      }
      const double cpu0 = CpuSeconds(owner->pid());
      double peers0 = 0;
      for (auto& p : peers) peers0 += CpuSeconds(p->pid());
      const double watched = PutRate(*owner, "watched" + r + "-", spin);
      double peers1 = 0;
      for (auto& p : peers) peers1 += CpuSeconds(p->pid());
      const double owner_cpu = CpuSeconds(owner->pid()) - cpu0;
      for (auto& p : peers) p->Stop(SIGTERM);
      const char* mode = apart ? "spinning, peers on core 1" : spin ? "spinning" : "not spinning";
      std::printf(
          "owner 4 KiB puts (%s, round %d): %.0f/s with 4 subscribed peers, %.0f/s with none; "
          "the owner used %.2f CPU s in the watched second (%.2f alone), the 4 peers %.2f\n",
          mode, round, watched, alone, owner_cpu, alone_cpu, peers1 - peers0);
      per_round.push_back(alone > 0 ? watched / alone : 0);
    }
    const char* label = apart ? ", peers on their own core" : spin ? "" : ", no spin";
    ratios.push_back({std::string("owner put rate, 4 peers / none") + label + " (median of " +
                          std::to_string(rounds) + ")",
                      Median(per_round), 0.9});
    if (apart) PinThisThread(-1);
  }
  PrintRatios(ratios);
  if (!json.empty() && !WriteJson(json, {}, ratios)) return 1;
  return 0;
}
