// What the cluster soak's driver (cluster_soak.cc) and its clients
// (cluster_soak_client.cc) share: the managers as the clients see them while
// they are killed, restarted, paused and drained, the tally of what the
// clients saw, and the values every read is checked against.
#ifndef TIERKV_BENCH_CLUSTER_SOAK_H_
#define TIERKV_BENCH_CLUSTER_SOAK_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fault_proxy.h"
#include "manager_process.h"

namespace tierkv::cluster_soak {

// One manager of the soak. Its process is replaced when the driver kills and
// restarts it; `epoch` changes at the kill and again once the new process
// serves, so a client can tell a failure caused by the restart from one that
// is not.
struct Member {
  std::string id;
  std::vector<std::string> args;  // the same at every start: node id, --addr, --ssd-dir
  // In front of its peer port (--peer-advertise-addr): the other managers
  // reach its peer gRPC through it, so a partition can cut them off.
  std::unique_ptr<testing::FaultProxy> peer_proxy;
  std::mutex mu;
  std::unique_ptr<testing::ManagerProcess> proc;  // guarded by mu
  std::string uds;                                // guarded by mu
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> up{false};

  // The socket to connect to and the epoch it belongs to; "" while down.
  std::pair<std::string, uint64_t> Address() {
    std::lock_guard<std::mutex> lock(mu);
    if (!up) return {"", epoch.load()};
    return {uds, epoch.load()};
  }
};

// What the clients saw. Everything but the counters of expected outcomes
// fails the run.
struct Tally {
  std::atomic<uint64_t> ops{0}, misses{0}, no_space{0}, down{0}, unavailable_lookups{0};
  std::atomic<uint64_t> remote_candidates{0}, stale_mutable{0}, retries{0};
  // Removes everywhere of an old object that found nothing on a manager (it
  // held no copy): not counted among the misses.
  std::atomic<uint64_t> remove_absent{0};
  std::atomic<uint64_t> unexpected{0}, corrupt{0};
  std::mutex mu;
  std::vector<std::string> samples;  // the first few failures, for the report
  void Fail(std::atomic<uint64_t>* counter, const std::string& what) {
    ++*counter;
    std::lock_guard<std::mutex> lock(mu);
    if (samples.size() < 12) samples.push_back(what);
  }
};

// An immutable object a client stored and has not removed: where it put it,
// and how many managers had been killed before the put began (a kill after
// that may have lost it with its manager's DRAM, so only objects put after the
// last kill must survive).
struct Stored {
  int home = 0;
  uint64_t kills_before = 0;
};

struct ClientState {
  std::map<std::string, Stored> immutable;  // key -> where
  std::string tenant;
};

struct Shared {
  std::vector<std::unique_ptr<Member>> members;
  std::atomic<uint64_t> kills{0};
  Tally tally;
};

// The bytes of version `version` (1, 2, ...) of `key`: the version in the
// first 8 bytes, then bytes drawn from (key, version); the size too depends on
// both (4 KiB to 196 KiB, one value in sixteen 1 to 2 MiB).
std::string ValueOf(const std::string& key, uint64_t version);
// The version `bytes` hold when they are exactly a version of `key` no newer
// than `newest`; 0 when they are not (corruption).
uint64_t VersionIn(const std::string& key, const std::string& bytes, uint64_t newest);

// One client thread: until `deadline` (bench::NowSeconds), puts immutable
// objects and upserts mutable ones on its home manager and reads, batch
// reads and looks them up on any manager, checking every byte. Leaves its
// stored objects in *state.
void ClientLoop(int id, Shared* shared, double deadline, ClientState* state);

}  // namespace tierkv::cluster_soak

#endif  // TIERKV_BENCH_CLUSTER_SOAK_H_
