// tierkv_inventory_scale_bench: how the all-to-all inventory topology grows.
//
//   tierkv_inventory_scale_bench [--owners 4,16,64] [--objects 1000] [--deltas 100]
//                                [--json PATH]
//
// For each N, N owners run in this one process: each a store, its Inventory
// (owner and requester side, the real stream and index code) and its peer
// gRPC service, with every stream on an in-process channel (no sockets, no
// etcd: the member list is handed to each inventory directly). Each owner
// holds --objects objects before the members are announced. Reported per
// requester: the time until its index covers every other owner completely
// (snapshots included), its index bytes, and, after each owner puts --deltas
// more objects, the stream bytes sent per change per peer and the time until
// every requester has them all.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "cluster/global_index.h"
#include "cluster/inventory.h"
#include "cluster/peer_rpc.h"
#include "cluster/peer_server.h"
#include "store/store.h"

namespace tierkv::bench {
namespace {

struct Owner {
  std::unique_ptr<Store> store;
  std::unique_ptr<GlobalIndex> index;
  std::unique_ptr<Inventory> inventory;
  std::unique_ptr<PeerServer> server;
};

struct Scale {
  size_t owners = 0;
  double cover_s = 0, delta_s = 0;
  double index_bytes = 0;      // per requester
  double bytes_per_delta = 0;  // stream bytes per change per peer
  uint64_t threads = 0;
};

void PutObjects(Store& s, const std::string& prefix, size_t n) {
  const std::string value(64, 'v');
  for (size_t i = 0; i < n; ++i) {
    const std::string key = prefix + std::to_string(i);
    Result<AllocGrant> g = s.Alloc(Caller(1, 0), {"t", key}, value.size(), {});
    if (!g.ok()) continue;
    std::memcpy(g->data, value.data(), value.size());
    (void)s.Commit(Caller(1, 0), g->alloc_id);
  }
}

bool Covered(const std::vector<Owner>& owners, uint64_t entries_each) {
  for (const Owner& o : owners) {
    const IndexStats s = o.index->Stats();
    if (s.complete != owners.size() - 1 || s.entries != entries_each) return false;
  }
  return true;
}

double WaitCovered(const std::vector<Owner>& owners, uint64_t entries_each, double t0) {
  while (!Covered(owners, entries_each)) {
    if (NowSeconds() - t0 > 600) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return NowSeconds() - t0;
}

uint64_t Threads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoull(line.substr(8));
  }
  return 0;
}

Scale Run(size_t n, size_t objects, size_t deltas) {
  std::vector<Owner> owners(n);
  std::vector<MemberView> members;
  auto creds = std::make_shared<PeerCredentials>();
  for (size_t i = 0; i < n; ++i) {
    Owner& o = owners[i];
    StoreOptions so;
    so.journal_bytes = 4u << 20;
    // Every object takes at least one 4 KiB block of the pool.
    auto pool = DramPool::Create(std::max<uint64_t>(8u << 20, (objects + deltas + 1024) * 4096));
    Result<std::unique_ptr<Store>> made = Store::Create(so, std::move(*pool));
    o.store = std::move(*made);
    PutObjects(*o.store, "o" + std::to_string(i) + "-", objects);
    o.index = std::make_unique<GlobalIndex>(256u << 20);
    InventoryOptions io;
    io.node_id = "o" + std::to_string(i);
    io.runtime_uuid = "uuid-" + std::to_string(i);
    io.epoch = [] { return uint64_t{1}; };
    io.admitting = [] { return true; };
    io.credentials = creds;
    o.inventory = std::make_unique<Inventory>(io, o.store.get(), o.index.get());
    const std::string id = io.node_id;
    o.server = std::make_unique<PeerServer>([id, i] {
      return PeerIdentity{id, "uuid-" + std::to_string(i), 1, static_cast<uint32_t>(i), "", ""};
    });
    o.server->SetInventory(o.inventory.get());
    (void)o.server->Start("127.0.0.1:0");
    MemberView m;
    m.node_id = id;
    m.rank = static_cast<uint32_t>(i);
    m.endpoint = "inproc:" + std::to_string(i);
    m.runtime_uuid = "uuid-" + std::to_string(i);
    m.epoch = 1;
    members.push_back(m);
  }
  creds->dial = [&owners](const std::string& endpoint) {
    return InProcessChannel(*owners[std::stoul(endpoint.substr(7))].server);
  };
  Scale r;
  r.owners = n;
  const double t0 = NowSeconds();
  for (Owner& o : owners) o.inventory->SetMembers(members);
  r.cover_s = WaitCovered(owners, (n - 1) * objects, t0);
  uint64_t index_bytes = 0, out0 = 0;
  for (Owner& o : owners) {
    index_bytes += o.index->Stats().bytes;
    out0 += o.inventory->Stats().bytes_out;
  }
  r.index_bytes = double(index_bytes) / double(n);
  const double t1 = NowSeconds();
  for (size_t i = 0; i < n; ++i)
    PutObjects(*owners[i].store, "d" + std::to_string(i) + "-", deltas);
  r.delta_s = WaitCovered(owners, (n - 1) * (objects + deltas), t1);
  uint64_t out1 = 0;
  for (Owner& o : owners) out1 += o.inventory->Stats().bytes_out;
  r.bytes_per_delta = double(out1 - out0) / double(n * deltas * (n - 1));
  r.threads = Threads();
  for (Owner& o : owners) o.inventory->Stop();
  for (Owner& o : owners) o.server->Stop(0);
  return r;
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  using namespace tierkv::bench;
  std::vector<size_t> sizes = {4, 16, 64};
  size_t objects = 1000, deltas = 100;
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--owners") {
      sizes.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::stoul(item));
    } else if (a == "--objects") {
      objects = std::stoul(argv[i + 1]);
    } else if (a == "--deltas") {
      deltas = std::stoul(argv[i + 1]);
    } else if (a == "--json") {
      json = argv[i + 1];
    }
  }
  std::vector<Ratio> ratios;
  std::printf("%7s %12s %14s %16s %12s %8s\n", "owners", "covered s", "index B/req",
              "stream B/delta", "deltas s", "threads");
  for (size_t n : sizes) {
    const Scale s = Run(n, objects, deltas);
    std::printf("%7zu %12.3f %14.0f %16.1f %12.3f %8llu\n", n, s.cover_s, s.index_bytes,
                s.bytes_per_delta, s.delta_s, static_cast<unsigned long long>(s.threads));
    const std::string tag = std::to_string(n) + " owners";
    ratios.push_back({tag + ": coverage s", s.cover_s, 0});
    ratios.push_back({tag + ": index bytes per requester", s.index_bytes, 0});
    ratios.push_back({tag + ": stream bytes per delta per peer", s.bytes_per_delta, 0});
    ratios.push_back({tag + ": all deltas seen, s", s.delta_s, 0});
  }
  if (!json.empty() && !WriteJson(json, {}, ratios)) return 1;
  return 0;
}
