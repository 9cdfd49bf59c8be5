#include "cluster/delta_encoder.h"

#include <algorithm>

#include "store/store.h"

namespace tierkv {
namespace {

// Changes read from the feed at a time.
constexpr size_t kFeedChunk = 1024;

}  // namespace

InventoryScope::InventoryScope(const peer::Scope& s) : kind_(s.kind()) {
  for (const auto& n : s.namespaces()) names_.insert(n);
}

bool InventoryScope::Admits(std::string_view name_space) const {
  switch (kind_) {
    case peer::Scope::EMPTY:
      return false;
    case peer::Scope::EXACT:
      return names_.find(name_space) != names_.end();
    default:
      return true;
  }
}

namespace {

// A snapshot record or a journal change (both carry these fields).
template <typename R>
void FillRecord(const R& r, peer::InventoryRecord* out) {
  out->set_tenant(r.tenant);
  out->set_key(r.key);
  out->set_name_space(r.name_space);
  out->set_medium(static_cast<uint32_t>(r.medium));
  out->set_size(r.size);
  out->set_generation(r.generation);
  out->set_sequence(r.sequence);
}

}  // namespace

void ToInventoryRecord(const SnapshotRecord& r, peer::InventoryRecord* out) { FillRecord(r, out); }

void ToInventoryChange(const Change& c, peer::InventoryChange* out) {
  out->set_sequence(c.sequence);
  out->set_kind(c.kind == ChangeKind::kStored    ? peer::InventoryChange::STORED
                : c.kind == ChangeKind::kRemoved ? peer::InventoryChange::REMOVED
                                                 : peer::InventoryChange::CLEARED);
  FillRecord(c, out->mutable_record());
}

std::string& UnparsedDelta(peer::InventoryFrame& frame) {
  return *frame.GetReflection()->MutableUnknownFields(&frame)->AddLengthDelimited(
      peer::InventoryFrame::kDeltaFieldNumber);
}

DeltaEncoder::Reader::Reader(DeltaEncoder& encoder, uint64_t after)
    : encoder_(encoder), after_(after) {
  std::lock_guard<std::mutex> lock(encoder_.mu_);
  position_ = encoder_.positions_.insert(after);
}

DeltaEncoder::Reader::~Reader() {
  std::lock_guard<std::mutex> lock(encoder_.mu_);
  encoder_.positions_.erase(position_);
  encoder_.Trim();
}

DeltaEncoder::Batch DeltaEncoder::Next(Reader& reader, uint64_t until, const InventoryScope& scope,
                                       size_t max_bytes, std::string& out) {
  std::lock_guard<std::mutex> lock(mu_);
  Batch b;
  b.from = reader.after_ + 1;
  b.to = reader.after_;
  if (until < b.from) return b;
  const bool held = first_ != 0 && first_ <= b.from;
  if (!held || !Extend(until)) {
    // The buffer starts after this reader's next change, or the journal lost
    // changes the buffer lacks (this reader may be past them).
    if (!StartAt(b.from) || !Extend(until)) {
      b.behind = true;
      b.oldest_kept = journal_first_;
      return b;
    }
  }
  // The batch's end: `until`, or the change that takes it to max_bytes.
  const size_t begin = static_cast<size_t>(b.from - first_);
  const size_t end = std::min(entries_.size(), static_cast<size_t>(until - first_ + 1));
  // Each change's scope is looked at once: the admitted ones are noted.
  size_t stop = begin, bytes = 0;
  admitted_.clear();
  while (stop < end && bytes < max_bytes) {
    const Entry& e = entries_[stop++];
    const char* at = buffer_.data() + (e.at - base_);
    if (e.cleared || scope.Admits(std::string_view(at + e.length, e.ns_bytes))) {
      bytes += e.length;
      admitted_.push_back(&e);
    }
  }
  b.to = first_ + stop - 1;
  b.changes = admitted_.size();
  // Header, then the admitted changes' bytes: together, one DeltaBatch.
  head_.set_from_sequence(b.from);
  head_.set_to_sequence(b.to);
  out.clear();
  head_.AppendToString(&out);
  out.reserve(out.size() + bytes);
  for (const Entry* e : admitted_) out.append(buffer_.data() + (e->at - base_), e->length);
  // The reader moves: its node in positions_ is reused, not reallocated.
  auto node = positions_.extract(reader.position_);
  node.value() = b.to;
  reader.position_ = positions_.insert(std::move(node));
  reader.after_ = b.to;
  Trim();
  return b;
}

bool DeltaEncoder::Extend(uint64_t until) {
  while (next() <= until) {
    feed_.ReadAfter(next() - 1, std::min<uint64_t>(until - next() + 1, kFeedChunk), read_);
    journal_first_ = read_.first_kept;
    if (read_.behind) return false;
    if (read_.changes.empty()) break;  // `until` is past the newest change
    Append();
  }
  return true;
}

bool DeltaEncoder::StartAt(uint64_t first) {
  feed_.ReadAfter(first - 1, kFeedChunk, read_);
  journal_first_ = read_.first_kept;
  if (read_.behind) return false;
  entries_.clear();
  buffer_.clear();
  base_ = 0;
  first_ = first;
  Append();
  return true;
}

void DeltaEncoder::Append() {
  if (one_.changes_size() == 0) one_.add_changes();
  for (const Change& c : read_.changes) {
    ToInventoryChange(c, one_.mutable_changes(0));
    const size_t start = buffer_.size();
    // A DeltaBatch of this one change: its tag, its length and its bytes.
    one_.AppendToString(&buffer_);
    Entry e;
    e.at = base_ + start;
    e.length = static_cast<uint32_t>(buffer_.size() - start);
    e.ns_bytes = static_cast<uint32_t>(c.name_space.size());
    e.cleared = c.kind == ChangeKind::kCleared;
    buffer_.append(c.name_space);
    entries_.push_back(e);
  }
}

void DeltaEncoder::Trim() {
  if (positions_.empty()) {  // no reader: nothing is kept
    std::deque<Entry>().swap(entries_);
    std::string().swap(buffer_);
    first_ = base_ = 0;
    return;
  }
  if (first_ == 0) return;
  const uint64_t keep = std::max(*positions_.begin() + 1, journal_first_);
  while (!entries_.empty() && first_ < keep) {
    entries_.pop_front();
    ++first_;
  }
  // Bytes leave the buffer's front once they are at least half of it (each
  // byte is moved a bounded number of times).
  const size_t dropped =
      entries_.empty() ? buffer_.size() : static_cast<size_t>(entries_.front().at - base_);
  if (dropped > 0 && dropped * 2 >= buffer_.size()) {
    buffer_.erase(0, dropped);
    base_ += dropped;
  }
}

size_t DeltaEncoder::held_changes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t DeltaEncoder::held_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffer_.size() + entries_.size() * sizeof(Entry);
}

}  // namespace tierkv
