// Quarantine: pool ranges kept out of reuse until a client session ends. A
// write grant that expired while its session lives may still be written
// into, so its range is held for that session, not freed (docs/store.md,
// "Replica lifecycle").
//
// Thread-safety: thread-safe; its own mutex, taken under a shard lock and
// never around one.
#ifndef TIERKV_STORE_QUARANTINE_H_
#define TIERKV_STORE_QUARANTINE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "media/offset_allocator.h"

namespace tierkv {

class Quarantine {
 public:
  // A range and the bytes asked for it (what freeing it needs).
  using Range = std::pair<Extent, uint64_t>;

  // Holds `range` until `session` ends.
  void Hold(uint64_t session, const Range& range);
  // Keeps `held` (a range of another pool, freed with its last reference)
  // alive until `session` ends.
  void Keep(uint64_t session, std::shared_ptr<void> held);
  // The ranges held for `session`, no longer counted; the caller frees them.
  std::vector<Range> Release(uint64_t session);
  // DRAM bytes held now (reserved sizes; what Keep holds is not counted).
  uint64_t bytes() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<Range>> by_session_;
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<void>>> kept_;
  uint64_t bytes_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_QUARANTINE_H_
