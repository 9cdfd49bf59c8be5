// OpStats: request / success / failure / not-found counters per operation kind.
//
// Counting rules (the REST contract's): success = OK; not_found = a miss, never a
// failure; failure = every other outcome, DUPLICATED and NO_SPACE included. A batch
// call counts once under its batch op and adds each item to the single op; the
// batch itself is a failure when any item failed, else not_found when any item
// missed, else a success.
//
// Counters are kept in total and per client rank (ranks below kMaxRanks; higher
// ranks count in the totals only).
//
// Thread-safety: all methods are thread-safe (relaxed atomics).
#ifndef TIERKV_STORE_OP_STATS_H_
#define TIERKV_STORE_OP_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv {

enum class Op : uint8_t {
  kAlloc,
  kBatchAlloc,
  kGet,
  kBatchGet,
  kRemove,
  kBatchRemove,
  kRemoveAll,
  kUpdateState,
  kBatchUpdateState,
  kQuery,
  kBatchQuery,
  kGetAllKeys,
  kExistKey,
  kBatchExistKey,
  kMount,
  kUnmount,
};
inline constexpr int kOpCount = 16;

// "alloc", "batch_alloc", ... as the REST contract spells them.
std::string_view OpName(Op op);

struct OpCounts {
  uint64_t requests = 0;
  uint64_t success = 0;
  uint64_t failure = 0;
  uint64_t not_found = 0;
};

class OpStats {
 public:
  static constexpr uint32_t kMaxRanks = 64;

  // Counts one call of `op` that ended with `code`.
  void Record(Op op, Code code, uint32_t rank);

  // Counts one batch call: `batch_op` once, and each item under `item_op`.
  void RecordBatch(Op batch_op, Op item_op, std::span<const Code> item_codes, uint32_t rank);

  OpCounts Get(Op op) const;
  OpCounts GetForRank(Op op, uint32_t rank) const;
  // True when any call from `rank` was counted.
  bool RankSeen(uint32_t rank) const;

 private:
  struct Cell {
    std::atomic<uint64_t> requests{0}, success{0}, failure{0}, not_found{0};
    void Add(Code code, uint64_t n);
    OpCounts Load() const;
  };
  void Add(Op op, Code code, uint32_t rank, uint64_t n);

  std::array<Cell, kOpCount> total_;
  std::array<std::array<Cell, kOpCount>, kMaxRanks> per_rank_;
  std::array<std::atomic<bool>, kMaxRanks> rank_seen_{};
};

}  // namespace tierkv

#endif  // TIERKV_STORE_OP_STATS_H_
