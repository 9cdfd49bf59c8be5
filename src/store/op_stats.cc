#include "store/op_stats.h"

namespace tierkv {

std::string_view OpName(Op op) {
  static constexpr std::string_view kNames[kOpCount] = {
      "alloc",        "batch_alloc",  "get",          "batch_get",          "remove",
      "batch_remove", "remove_all",   "update_state", "batch_update_state", "query",
      "batch_query",  "get_all_keys", "exist_key",    "batch_exist_key",    "mount",
      "unmount"};
  return kNames[static_cast<int>(op)];
}

void OpStats::Cell::Add(Code code, uint64_t n) {
  requests.fetch_add(n, std::memory_order_relaxed);
  if (code == Code::kOk) {
    success.fetch_add(n, std::memory_order_relaxed);
  } else if (code == Code::kNotFound) {
    not_found.fetch_add(n, std::memory_order_relaxed);
  } else {
    failure.fetch_add(n, std::memory_order_relaxed);
  }
}

OpCounts OpStats::Cell::Load() const {
  OpCounts c;
  c.requests = requests.load(std::memory_order_relaxed);
  c.success = success.load(std::memory_order_relaxed);
  c.failure = failure.load(std::memory_order_relaxed);
  c.not_found = not_found.load(std::memory_order_relaxed);
  return c;
}

void OpStats::Add(Op op, Code code, uint32_t rank, uint64_t n) {
  const int i = static_cast<int>(op);
  total_[i].Add(code, n);
  if (rank < kMaxRanks) {
    per_rank_[rank][i].Add(code, n);
    if (!rank_seen_[rank].load(std::memory_order_relaxed)) {
      rank_seen_[rank].store(true, std::memory_order_relaxed);
    }
  }
}

void OpStats::Record(Op op, Code code, uint32_t rank) { Add(op, code, rank, 1); }

void OpStats::RecordBatch(Op batch_op, Op item_op, std::span<const Code> item_codes,
                          uint32_t rank) {
  // Counted per outcome class, so a batch costs a few atomic adds, not a few per item.
  uint64_t ok = 0, missed = 0, failed = 0;
  for (Code c : item_codes) {
    if (c == Code::kOk) {
      ++ok;
    } else if (c == Code::kNotFound) {
      ++missed;
    } else {
      ++failed;
    }
  }
  if (ok > 0) Add(item_op, Code::kOk, rank, ok);
  if (missed > 0) Add(item_op, Code::kNotFound, rank, missed);
  if (failed > 0) Add(item_op, Code::kInternal, rank, failed);  // every other code is a failure
  const Code outcome = failed > 0 ? Code::kInternal : missed > 0 ? Code::kNotFound : Code::kOk;
  Add(batch_op, outcome, rank, 1);
}

OpCounts OpStats::Get(Op op) const { return total_[static_cast<int>(op)].Load(); }

OpCounts OpStats::GetForRank(Op op, uint32_t rank) const {
  if (rank >= kMaxRanks) return {};
  return per_rank_[rank][static_cast<int>(op)].Load();
}

bool OpStats::RankSeen(uint32_t rank) const {
  return rank < kMaxRanks && rank_seen_[rank].load(std::memory_order_relaxed);
}

}  // namespace tierkv
