#include "cluster/copy_tracker.h"

#include <spdlog/spdlog.h>

namespace tierkv {

bool CopyTracker::Track(std::string_view tenant, std::string_view key, uint64_t local_generation,
                        Source source, bool keep_stale) {
  const Hash h = OwnerView::HashOf(tenant, key);
  std::vector<Victim> victims;
  {
    std::lock_guard lock(mu_);
    auto old = copies_.find(h);
    if (old != copies_.end()) {
      std::vector<Victim> replaced;  // its value was replaced here: nothing to remove
      EvictLocked(h, replaced);
    }
    // Tracked first, judged after: a change the index applies from now on is
    // judged again by OnChanges, one applied before is in what StaleLocked reads.
    Copy& c = copies_[h];
    c.tenant = std::string(tenant);
    c.key = std::string(key);
    c.local_generation = local_generation;
    c.source = std::move(source);
    by_owner_[c.source.owner].insert(h);
    size_.store(copies_.size(), std::memory_order_relaxed);
    if (StaleLocked(h, c)) EvictLocked(h, victims);
  }
  if (victims.empty()) return true;
  if (keep_stale) {
    dropped_stale_.fetch_add(1, std::memory_order_relaxed);  // its caller removes it
  } else {
    Remove(victims, dropped_stale_);
  }
  return false;
}

bool CopyTracker::StaleLocked(const Hash& h, const Copy& c) const {
  const OwnerEntry v = index_->EntryOf(c.source.owner, c.source.owner_uuid, h);
  switch (v.state) {
    case OwnerEntry::kGone:
      return true;
    case OwnerEntry::kPartial:
      return false;  // judged when the owner's view is installed again
    case OwnerEntry::kComplete:
      break;
  }
  // An owner's generations only grow: a newer one there replaced this value.
  if (v.found && v.generation > c.source.generation) return true;
  // Until the view has reached the sequence read after the pin, it may not
  // show this value yet; once it has, it shows this value or what followed.
  if (v.watermark < c.source.sequence) return false;
  return !v.found || v.generation != c.source.generation;
}

void CopyTracker::EvictLocked(const Hash& h, std::vector<Victim>& out) {
  auto it = copies_.find(h);
  if (it == copies_.end()) return;
  out.push_back(
      {std::move(it->second.tenant), std::move(it->second.key), it->second.local_generation});
  auto owner = by_owner_.find(it->second.source.owner);
  if (owner != by_owner_.end()) {
    owner->second.erase(h);
    if (owner->second.empty()) by_owner_.erase(owner);
  }
  copies_.erase(it);
  size_.store(copies_.size(), std::memory_order_relaxed);
}

void CopyTracker::Remove(const std::vector<Victim>& victims, std::atomic<uint64_t>& counter) {
  for (const Victim& v : victims) {
    // NOT_FOUND: it went meanwhile, or a local put replaced it; either way
    // the fetched value is no longer served.
    if (store_->admin().RemoveIfAt({v.tenant, v.key}, v.local_generation).ok()) {
      counter.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void CopyTracker::OnChanges(const std::string& owner, std::span<const InventoryDelta> changes) {
  std::vector<Victim> victims;
  {
    std::lock_guard lock(mu_);
    auto owned = by_owner_.find(owner);
    if (owned == by_owner_.end()) return;
    std::vector<Hash> judge;
    for (const InventoryDelta& d : changes) {
      if (d.kind == InventoryDelta::kCleared) {
        for (const Hash& h : owned->second) {
          if (copies_.at(h).tenant == d.tenant) judge.push_back(h);
        }
        continue;
      }
      const Hash h = OwnerView::HashOf(d.tenant, d.key);
      if (owned->second.count(h) > 0) judge.push_back(h);
    }
    for (const Hash& h : judge) {
      auto it = copies_.find(h);
      if (it != copies_.end() && StaleLocked(h, it->second)) EvictLocked(h, victims);
    }
  }
  Remove(victims, dropped_stale_);
}

std::vector<CopyTracker::Victim> CopyTracker::EvictOwnerLocked(const std::string& owner,
                                                               bool only_stale) {
  std::vector<Victim> victims;
  auto owned = by_owner_.find(owner);
  if (owned == by_owner_.end()) return victims;
  const std::vector<Hash> all(owned->second.begin(), owned->second.end());
  for (const Hash& h : all) {
    if (!only_stale || StaleLocked(h, copies_.at(h))) EvictLocked(h, victims);
  }
  return victims;
}

void CopyTracker::OnInstalled(const std::string& owner) {
  std::vector<Victim> victims;
  {
    std::lock_guard lock(mu_);
    victims = EvictOwnerLocked(owner, /*only_stale=*/true);
  }
  Remove(victims, dropped_stale_);
}

void CopyTracker::DropOwner(const std::string& owner) {
  std::vector<Victim> victims;
  {
    std::lock_guard lock(mu_);
    victims = EvictOwnerLocked(owner, /*only_stale=*/false);
  }
  if (!victims.empty()) {
    spdlog::info("the inventory stream of {} failed: {} copies of its values dropped here", owner,
                 victims.size());
  }
  Remove(victims, dropped_lost_);
}

void CopyTracker::Retain(const std::map<std::string, std::string>& live) {
  std::vector<Victim> victims;
  {
    std::lock_guard lock(mu_);
    std::vector<Hash> gone;
    for (const auto& [h, c] : copies_) {
      auto it = live.find(c.source.owner);
      if (it == live.end() || it->second != c.source.owner_uuid) gone.push_back(h);
    }
    for (const Hash& h : gone) EvictLocked(h, victims);
  }
  Remove(victims, dropped_lost_);
}

CopyStats CopyTracker::Stats() const {
  CopyStats s;
  s.tracked = size_.load();
  s.dropped_stale = dropped_stale_.load();
  s.dropped_lost = dropped_lost_.load();
  return s;
}

void CopyTracker::OnRemoved(const ReplicaEvent& event) {
  // Copies are DRAM-only.
  if (event.medium != Medium::kDram || size_.load(std::memory_order_relaxed) == 0) return;
  const Hash h = OwnerView::HashOf(event.tenant, event.key);
  std::lock_guard lock(mu_);
  auto it = copies_.find(h);
  if (it == copies_.end() || it->second.local_generation != event.generation) return;
  std::vector<Victim> unused;
  EvictLocked(h, unused);
}

void CopyTracker::OnTenantCleared(std::string_view tenant) {
  if (size_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mu_);
  std::vector<Hash> gone;
  for (const auto& [h, c] : copies_) {
    if (c.tenant == tenant) gone.push_back(h);
  }
  std::vector<Victim> unused;
  for (const Hash& h : gone) EvictLocked(h, unused);
}

}  // namespace tierkv
