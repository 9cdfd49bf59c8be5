#include "cluster/global_index.h"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <mutex>

#include "common/composite_key.h"
#include "common/prefetch.h"

namespace tierkv {

OwnerView::KeyHash OwnerView::HashOf(std::string_view tenant, std::string_view key) {
  // One pass over the composite key, built on the stack (the streaming form
  // costs about three times as much for keys this short): this runs for every
  // record and delta applied and once per lookup.
  char small[256];
  const size_t n = CompositeSize(tenant, key);
  std::string large;
  char* buf = small;
  if (n > sizeof small) {
    large.resize(n);
    buf = large.data();
  }
  WriteComposite(tenant, key, buf);
  const XXH128_hash_t h = XXH3_128bits(buf, n);
  return KeyHash{h.low64, h.high64};
}

uint32_t OwnerView::Intern(const std::string& name) {
  if (names_[last_name_] == name) return last_name_;
  auto [it, added] = name_ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (added) {
    names_.push_back(name);
    names_bytes_ += 2 * (name.size() + 48);  // the string twice, with their nodes
  }
  last_name_ = it->second;
  return it->second;
}

void OwnerView::Apply(const InventoryDelta& d) {
  Apply(d, d.kind == InventoryDelta::kCleared ? KeyHash{} : HashOf(d.tenant, d.key));
}

void OwnerView::ApplyAll(std::span<const InventoryDelta> changes) {
  constexpr size_t kWindow = 16;
  std::array<KeyHash, kWindow> hashes;
  std::array<size_t, kWindow> buckets;
  for (size_t at = 0; at < changes.size(); at += kWindow) {
    const std::span<const InventoryDelta> window =
        changes.subspan(at, std::min(kWindow, changes.size() - at));
    for (size_t i = 0; i < window.size(); ++i) {
      if (window[i].kind != InventoryDelta::kCleared) {
        hashes[i] = HashOf(window[i].tenant, window[i].key);
        buckets[i] = entries_.bucket(hashes[i]);
      }
    }
    for (size_t i = 0; i < window.size(); ++i) {
      if (window[i].kind != InventoryDelta::kCleared) PrefetchBucket(entries_, buckets[i]);
    }
    for (size_t i = 0; i < window.size(); ++i) Apply(window[i], hashes[i]);
  }
}

void OwnerView::Apply(const InventoryDelta& d, const KeyHash& h) {
  if (d.kind == InventoryDelta::kCleared) {
    auto id = name_ids_.find(d.tenant);
    if (id == name_ids_.end()) return;
    std::erase_if(entries_, [t = id->second](const auto& kv) { return kv.second.tenant == t; });
    return;
  }
  auto it = entries_.find(h);
  if (d.kind == InventoryDelta::kStored) {
    if (it == entries_.end()) {
      it = entries_.emplace(h, RemoteEntry{}).first;
      it->second.tenant = Intern(d.tenant);
    }
    RemoteEntry& e = it->second;
    if (e.generation != d.generation) {  // a new value: replicas of the old one are gone
      e.dram = e.ssd = false;
      e.generation = d.generation;
    }
    e.name_space = Intern(d.name_space);
    e.size = d.size;
    (d.medium == Medium::kSsd ? e.ssd : e.dram) = true;
    return;
  }
  if (it == entries_.end() || it->second.generation != d.generation) return;  // older value
  (d.medium == Medium::kSsd ? it->second.ssd : it->second.dram) = false;
  if (!it->second.dram && !it->second.ssd) entries_.erase(it);
}

const RemoteEntry* OwnerView::Find(std::string_view tenant, std::string_view key) const {
  return Find(HashOf(tenant, key));
}

const RemoteEntry* OwnerView::Find(const KeyHash& h) const {
  auto it = entries_.find(h);
  return it == entries_.end() ? nullptr : &it->second;
}

void GlobalIndex::SetExpected(const std::map<std::string, Expected>& owners) {
  std::unique_lock lock(mu_);
  for (auto it = owners_.begin(); it != owners_.end();) {
    auto want = owners.find(it->first);
    if (want == owners.end() || want->second.uuid != it->second.uuid) {
      RetireLocked(it->second.uuid);
      it = owners_.erase(it);  // left (or restarted as a new incarnation): hidden at once
    } else {
      ++it;
    }
  }
  for (const auto& [node, id] : owners) {
    auto [it, added] = owners_.try_emplace(node);
    if (added) {
      it->second.uuid = id.uuid;
      it->second.rank = id.rank;
    }
    NoteEpochLocked(node, id.epoch);
  }
  lock.unlock();
  NotifyAdvanced();  // a waiter for an owner that left stops waiting
}

void GlobalIndex::BeginStaging() {
  std::unique_lock lock(mu_);
  ++staging_views_;
}

bool GlobalIndex::ReserveStaging(uint64_t bytes) {
  std::unique_lock lock(mu_);
  if (ActiveBytesLocked() + staging_bytes_ + bytes > budget_) return false;
  staging_bytes_ += bytes;
  return true;
}

void GlobalIndex::AbandonStaging(uint64_t bytes, bool over_budget) {
  std::unique_lock lock(mu_);
  staging_bytes_ -= std::min(staging_bytes_, bytes);
  if (staging_views_ > 0) --staging_views_;
  if (over_budget) ++refused_budget_;
}

void GlobalIndex::Install(const std::string& owner, const std::string& uuid,
                          std::unique_ptr<OwnerView> view, uint64_t watermark, uint64_t staged) {
  std::unique_lock lock(mu_);
  staging_bytes_ -= std::min(staging_bytes_, staged);
  if (staging_views_ > 0) --staging_views_;
  auto it = owners_.find(owner);
  if (it == owners_.end() || it->second.uuid != uuid) return;  // it left meanwhile
  it->second.view = std::move(view);
  it->second.complete = true;
  it->second.watermark = watermark;
  ++installs_;
  lock.unlock();
  NotifyAdvanced();
}

bool GlobalIndex::ApplyDeltas(const std::string& owner, uint64_t from_sequence,
                              uint64_t to_sequence, const std::vector<InventoryDelta>& changes) {
  std::unique_lock lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end()) return true;  // forgotten: nothing to keep up to date
  Owner& o = it->second;
  if (!o.complete || !o.view || from_sequence != o.watermark + 1 || to_sequence < o.watermark) {
    return false;
  }
  o.view->ApplyAll(changes);
  const bool advanced = to_sequence > o.watermark;
  o.watermark = to_sequence;
  lock.unlock();
  if (advanced) NotifyAdvanced();
  return true;
}

void GlobalIndex::MarkPartial(const std::string& owner, bool reset) {
  std::unique_lock lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end()) return;
  if (it->second.complete && reset) ++resets_;
  it->second.complete = false;
}

OwnerEntry GlobalIndex::EntryOf(const std::string& owner, std::string_view uuid,
                                const OwnerView::KeyHash& h) const {
  OwnerEntry out;
  std::shared_lock lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end() || it->second.uuid != uuid) return out;
  const Owner& o = it->second;
  if (!o.complete || !o.view) {
    out.state = OwnerEntry::kPartial;
    return out;
  }
  out.state = OwnerEntry::kComplete;
  out.watermark = o.watermark;
  if (const RemoteEntry* e = o.view->Find(h)) {
    out.found = true;
    out.generation = e->generation;
  }
  return out;
}

IndexLookup GlobalIndex::Lookup(std::string_view tenant, std::string_view key) const {
  IndexLookup out;
  const OwnerView::KeyHash h = OwnerView::HashOf(tenant, key);  // the same in every view
  std::shared_lock lock(mu_);
  bool all_complete = true;
  for (const auto& [node, o] : owners_) {
    all_complete &= o.complete;
    if (!o.complete && out.incomplete_owner.empty()) out.incomplete_owner = node;
    if (!o.view) continue;
    const RemoteEntry* e = o.view->Find(h);
    if (e == nullptr) continue;
    for (Medium m : {Medium::kDram, Medium::kSsd}) {
      if (!(m == Medium::kDram ? e->dram : e->ssd)) continue;
      out.locations.push_back({node, o.uuid, o.rank, m, e->size, e->generation, o.complete,
                               o.view->Name(e->name_space)});
    }
  }
  out.absence_proved = out.locations.empty() && all_complete;
  return out;
}

uint64_t GlobalIndex::ActiveBytesLocked() const {
  uint64_t b = 0;
  for (const auto& [node, o] : owners_) b += o.view ? o.view->bytes() : 0;
  return b;
}

IndexStats GlobalIndex::Stats() const {
  IndexStats s;
  std::shared_lock lock(mu_);
  s.expected = owners_.size();
  for (const auto& [node, o] : owners_) {
    if (o.complete) {
      ++s.complete;
    } else if (o.view) {
      ++s.partial;
    } else {
      ++s.missing;
    }
    if (o.view) s.entries += o.view->size();
  }
  s.staging = staging_views_;
  s.bytes = ActiveBytesLocked() + staging_bytes_;
  s.budget = budget_;
  s.installs = installs_;
  s.resets = resets_;
  s.refused_budget = refused_budget_;
  s.rejected_views = rejected_views_.load(std::memory_order_relaxed);
  return s;
}

FenceSeen GlobalIndex::Seen(const FenceOwner& owner) const {
  std::shared_lock lock(mu_);
  return SeenLocked(owner);
}

FenceSeen GlobalIndex::SeenLocked(const FenceOwner& owner) const {
  FenceSeen seen;
  if (auto e = newest_epoch_.find(owner.node); e != newest_epoch_.end()) seen.epoch = e->second;
  seen.retired = (!owner.uuid.empty() && retired_.contains(owner.uuid)) ||
                 (owner.epoch != 0 && seen.epoch > owner.epoch);
  auto it = owners_.find(owner.node);
  if (it == owners_.end()) return seen;
  const Owner& o = it->second;
  seen.view_uuid = o.complete ? o.uuid : std::string();
  seen.current = o.complete && (owner.uuid.empty() || o.uuid == owner.uuid);
  seen.covered = seen.current ? o.watermark : 0;
  return seen;
}

void GlobalIndex::NoteEpochLocked(const std::string& node, uint64_t epoch) {
  constexpr size_t kNodesKept = 4096;
  if (epoch == 0) return;
  auto [it, added] = newest_epoch_.try_emplace(node, epoch);
  if (!added) {
    it->second = std::max(it->second, epoch);
    return;
  }
  epoch_order_.push_back(node);
  if (epoch_order_.size() > kNodesKept) {
    newest_epoch_.erase(epoch_order_.front());
    epoch_order_.pop_front();
  }
}

void GlobalIndex::RetireLocked(const std::string& uuid) {
  constexpr size_t kRetiredKept = 4096;
  if (uuid.empty() || !retired_.insert(uuid).second) return;
  retired_order_.push_back(uuid);
  if (retired_order_.size() > kRetiredKept) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
}

FenceSeen GlobalIndex::AwaitFence(const FenceOwner& owner, uint64_t sequence,
                                  std::chrono::steady_clock::time_point deadline) const {
  FenceSeen seen;
  std::unique_lock wait(wait_mu_);
  ++waiters_;
  // Looked at first, after each wake-up, and once more at the deadline.
  advanced_.wait_until(wait, deadline, [&] {
    seen = Seen(owner);
    return seen.Settled(sequence);
  });
  --waiters_;
  return seen;
}

void GlobalIndex::NotifyAdvanced() const {
  // Taking wait_mu_ orders this after a waiter's check, so no wake-up is lost.
  std::lock_guard wait(wait_mu_);
  if (waiters_ > 0) advanced_.notify_all();
}

}  // namespace tierkv
