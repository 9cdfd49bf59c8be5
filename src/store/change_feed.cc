#include "store/change_feed.h"

#include <algorithm>
#include <chrono>

namespace tierkv {

uint64_t ChangeFeed::Append(ChangeKind kind, const ReplicaEvent& event) {
  if (budget_ == 0) return last_.fetch_add(1, std::memory_order_acq_rel) + 1;
  std::unique_lock<std::mutex> lock(mu_);
  Change& c = NextSlot();
  c.kind = kind;
  c.tenant.assign(event.tenant);
  c.key.assign(event.key);
  c.group_id.assign(event.group_id);
  c.name_space.assign(event.name_space);
  c.medium = event.medium;
  c.size = event.size;
  c.generation = event.generation;
  c.cause = event.cause;
  TrackUpsert(c);
  return Commit(c, lock);
}

uint64_t ChangeFeed::stable_sequence() const {
  if (budget_ == 0) return last_sequence();
  return stable_.load(std::memory_order_acquire);
}

void ChangeFeed::TrackUpsert(const Change& c) {
  if (c.kind == ChangeKind::kRemoved && c.cause == RemoveCause::kReplaced) {
    std::string id = c.tenant + '\0' + c.key;
    for (const auto& [open, first] : open_) {
      if (open == id) return;  // its other replica: the pair opened already
    }
    open_.emplace_back(std::move(id), last_.load(std::memory_order_relaxed) + 1);
    return;
  }
  if (c.kind != ChangeKind::kStored || open_.empty()) return;
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    if (it->first.size() == c.tenant.size() + 1 + c.key.size() &&
        it->first.compare(0, c.tenant.size(), c.tenant) == 0 &&
        it->first.compare(c.tenant.size() + 1, std::string::npos, c.key) == 0) {
      open_.erase(it);
      return;
    }
  }
}

uint64_t ChangeFeed::AppendCleared(std::string_view tenant) {
  if (budget_ == 0) return last_.fetch_add(1, std::memory_order_acq_rel) + 1;
  std::unique_lock<std::mutex> lock(mu_);
  Change& c = NextSlot();
  c.kind = ChangeKind::kCleared;
  c.tenant.assign(tenant);
  c.key.clear();
  c.group_id.clear();
  c.name_space.clear();
  c.medium = Medium::kDram;
  c.size = 0;
  c.generation = 0;
  c.cause = RemoveCause::kRemoved;
  return Commit(c, lock);
}

Change& ChangeFeed::NextSlot() {
  if (count_ == ring_.size()) {
    // Full: double it, the oldest change first.
    std::vector<Change> grown(std::max<size_t>(16, ring_.size() * 2));
    for (size_t i = 0; i < count_; ++i) {
      grown[i] = std::move(ring_[(head_ + i) & (ring_.size() - 1)]);
    }
    ring_ = std::move(grown);
    head_ = 0;
  }
  return ring_[(head_ + count_) & (ring_.size() - 1)];
}

uint64_t ChangeFeed::Commit(Change& slot, std::unique_lock<std::mutex>& lock) {
  // The sequence is taken under the journal's lock, so the journal is in order.
  slot.sequence = last_.load(std::memory_order_relaxed) + 1;
  ++count_;
  bytes_ += Cost(slot);
  last_.store(slot.sequence, std::memory_order_release);
  uint64_t stable = slot.sequence;
  for (const auto& [id, first] : open_) stable = std::min(stable, first - 1);
  stable_.store(stable, std::memory_order_release);
  while (bytes_ > budget_ && count_ > 1) {
    bytes_ -= Cost(ring_[head_]);
    head_ = (head_ + 1) & (ring_.size() - 1);
    --count_;
    ++first_kept_;
  }
  const uint64_t sequence = slot.sequence;
  // Woken after the lock is let go, so a waiter does not wake only to block
  // on it again.
  lock.unlock();
  grew_.notify_all();
  return sequence;
}

bool ChangeFeed::WaitAfter(uint64_t after, int64_t timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return grew_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return stable_sequence() > after; });
}

FeedRead ChangeFeed::ReadAfter(uint64_t after, size_t max) const {
  FeedRead out;
  ReadAfter(after, max, out);
  return out;
}

void ChangeFeed::ReadAfter(uint64_t after, size_t max, FeedRead& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.behind = false;
  out.last = last_.load(std::memory_order_relaxed);
  out.first_kept = budget_ == 0 ? out.last + 1 : first_kept_;
  size_t n = 0;
  if (after + 1 < out.first_kept && after < out.last) {
    out.behind = true;
  } else if (after < out.last) {
    const size_t begin = static_cast<size_t>(after + 1 - first_kept_);
    n = std::min(count_ - begin, max);
    if (out.changes.size() < n) out.changes.resize(n);
    for (size_t i = 0; i < n; ++i) out.changes[i] = At(begin + i);  // keeps their capacity
  }
  out.changes.resize(n);
}

size_t ChangeFeed::journal_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace tierkv
