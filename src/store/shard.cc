// Shard: what one shard does on its own, under its lock.
#include "store/shard.h"

namespace tierkv::storage {

// splitmix64 over a per-shard state seeded from the kernel's random source. An
// id is only ever honoured for the session it was granted to; being hard to
// guess keeps a buggy client from hitting a live id of its own by accident.
uint64_t Shard::NextId() {
  for (;;) {
    uint64_t z = (id_state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const uint64_t id = (z << 8) | index;
    if ((z << 8) == 0 || pending.count(id) != 0 || leases.count(id) != 0 || pins.count(id) != 0) {
      continue;
    }
    return id;
  }
}

void Shard::AddLease(uint64_t id, const LeaseRecord& rec) {
  if (spare_leases_.empty()) {
    leases.emplace(id, rec);
    return;
  }
  auto node = std::move(spare_leases_.back());
  spare_leases_.pop_back();
  node.key() = id;
  node.mapped() = rec;
  leases.insert(std::move(node));
}

void Shard::DropLease(std::unordered_map<uint64_t, LeaseRecord>::iterator it) {
  auto node = leases.extract(it);
  node.mapped().hbm.reset();  // a kept node must not keep an HBM range allocated
  if (spare_leases_.size() < kSpareLeaseNodes) spare_leases_.push_back(std::move(node));
}

void Shard::Touch(Map::value_type& kv, int64_t now) {
  Entry& e = kv.second;
  e.last_access = now;
  if (e.dram_hook.queued || e.current) {
    e.dram_hook.owner = &kv;
    e.dram_hook.key = &kv.first;
    dram_queue->Touch(e.dram_hook);
  }
  if (e.hbm_hook.queued) hbm_queue.Touch(e.hbm_hook);
  if (e.ssd_hook.queued) ssd_queue.Touch(e.ssd_hook);
}

void Shard::KeepZombie(std::unique_ptr<Blob> blob) {
  blob->zombie = true;
  zombie_bytes += blob->extent.size;
  Blob* raw = blob.get();
  zombies.emplace(raw, std::move(blob));
}

std::unique_ptr<Blob> Shard::TakeFreedZombie(Blob* blob) {
  if (!blob->zombie || blob->leases > 0 || blob->pins > 0) return nullptr;
  auto it = zombies.find(blob);
  if (it == zombies.end()) return nullptr;
  std::unique_ptr<Blob> out = std::move(it->second);
  zombies.erase(it);
  zombie_bytes -= out->extent.size;
  return out;
}

}  // namespace tierkv::storage
