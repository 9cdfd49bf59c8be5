#include "store/change_feed.h"

#include <algorithm>

namespace tierkv {

uint64_t ChangeFeed::Append(ChangeKind kind, const ReplicaEvent& event) {
  if (budget_ == 0) return last_.fetch_add(1, std::memory_order_acq_rel) + 1;
  Change c;
  c.kind = kind;
  c.tenant = std::string(event.tenant);
  c.key = std::string(event.key);
  c.group_id = std::string(event.group_id);
  c.medium = event.medium;
  c.size = event.size;
  c.generation = event.generation;
  c.cause = event.cause;
  return Journal(std::move(c));
}

uint64_t ChangeFeed::AppendCleared(std::string_view tenant) {
  if (budget_ == 0) return last_.fetch_add(1, std::memory_order_acq_rel) + 1;
  Change c;
  c.kind = ChangeKind::kCleared;
  c.tenant = std::string(tenant);
  return Journal(std::move(c));
}

uint64_t ChangeFeed::Journal(Change c) {
  std::lock_guard<std::mutex> lock(mu_);
  // The sequence is taken under the journal's lock, so the journal is in order.
  c.sequence = last_.load(std::memory_order_relaxed) + 1;
  bytes_ += Cost(c);
  journal_.push_back(std::move(c));
  last_.store(journal_.back().sequence, std::memory_order_release);
  while (bytes_ > budget_ && journal_.size() > 1) {
    bytes_ -= Cost(journal_.front());
    journal_.pop_front();
    ++first_kept_;
  }
  return journal_.back().sequence;
}

FeedRead ChangeFeed::ReadAfter(uint64_t after, size_t max) const {
  FeedRead out;
  std::lock_guard<std::mutex> lock(mu_);
  out.last = last_.load(std::memory_order_relaxed);
  out.first_kept = budget_ == 0 ? out.last + 1 : first_kept_;
  if (after >= out.last) return out;
  if (after + 1 < out.first_kept) {
    out.behind = true;
    return out;
  }
  const size_t begin = static_cast<size_t>(after + 1 - first_kept_);
  const size_t end = std::min(journal_.size(), begin + max);
  out.changes.assign(journal_.begin() + static_cast<std::ptrdiff_t>(begin),
                     journal_.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

size_t ChangeFeed::journal_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace tierkv
