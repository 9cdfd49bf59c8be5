// S3FifoQueue: S3-FIFO (Yang et al., SOSP 2023). New elements enter a small
// probation FIFO (about 10 % of the queue); leaving it, one read again moves
// to the main FIFO, the others are victims and their key hashes go to a ghost,
// so that a victim that comes back soon enters main directly. Leaving main,
// an element read since it last went round goes round again (its count
// lowered), else it is the victim. Scans pass through probation without
// touching main. A touch of a queued element only counts (O(1), nothing
// moves).
#ifndef TIERKV_STORE_S3FIFO_QUEUE_H_
#define TIERKV_STORE_S3FIFO_QUEUE_H_

#include <string_view>
#include <unordered_set>

#include "store/eviction_queue.h"

namespace tierkv {

class S3FifoQueue final : public EvictionQueue {
 public:
  void Touch(QueueHook& hook) override;
  void Erase(QueueHook& hook) override;
  // Victims come one step of the FIFOs at a time, at most 2 x size + 2 steps
  // (`max_scan` does not apply: rotations are part of the policy). A victim
  // from probation enters the ghost when it is chosen.
  void Victims(size_t max, size_t max_scan, const Usable& usable,
               std::vector<QueueHook*>* out) override;
  size_t size() const override { return small_.size() + main_.size(); }

 private:
  static uint64_t GhostHash(std::string_view key);
  void Remember(uint64_t hash);

  std::list<QueueHook*> small_;  // probation, front = newest
  std::list<QueueHook*> main_;   // front = newest
  // The ghost: key hashes of recent probation victims, about as many as the
  // queue holds elements (a ring, and a set of what it holds).
  std::vector<uint64_t> ghost_ring_;
  size_t ghost_next_ = 0;
  std::unordered_set<uint64_t> ghost_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_S3FIFO_QUEUE_H_
