#include "store/s3fifo_queue.h"

#include <functional>

namespace tierkv {

uint64_t S3FifoQueue::GhostHash(std::string_view key) {
  return std::hash<std::string_view>{}(key) | 1;  // never 0 (an empty ring slot)
}

void S3FifoQueue::Touch(QueueHook& hook) {
  if (hook.queued) {
    if (hook.freq < 3) ++hook.freq;
    return;
  }
  // New: on probation, unless it was a probation victim lately.
  const bool ghost = ghost_.erase(GhostHash(*hook.key)) > 0;
  std::list<QueueHook*>& q = ghost ? main_ : small_;
  q.push_front(&hook);
  hook.pos = q.begin();
  hook.queued = true;
  hook.probation = !ghost;
  hook.freq = 0;
}

void S3FifoQueue::Erase(QueueHook& hook) {
  if (!hook.queued) return;
  (hook.probation ? small_ : main_).erase(hook.pos);
  hook.queued = false;
  hook.probation = false;
}

void S3FifoQueue::Remember(uint64_t hash) {
  uint64_t& slot = ghost_ring_[ghost_next_];
  if (slot != 0) ghost_.erase(slot);
  slot = hash;
  ghost_.insert(hash);
  ghost_next_ = (ghost_next_ + 1) % ghost_ring_.size();
}

void S3FifoQueue::Victims(size_t max, size_t /*max_scan*/, const Usable& usable,
                          std::vector<QueueHook*>* out) {
  const size_t total = size();
  if (total == 0 || max == 0) return;
  if (ghost_ring_.size() < total) ghost_ring_.resize(total, 0);
  size_t taken = 0;
  for (size_t step = 0; step < 2 * total + 2 && taken < max; ++step) {
    const bool from_small = !small_.empty() && (small_.size() * 10 >= total || main_.empty());
    std::list<QueueHook*>& q = from_small ? small_ : main_;
    QueueHook& h = *q.back();
    if (from_small && h.freq > 0) {  // read again on probation: into main
      main_.splice(main_.begin(), small_, h.pos);
      h.probation = false;
      h.freq = 0;
      continue;
    }
    if (!from_small && h.freq > 0) {  // read since it last went round: once more
      --h.freq;
      main_.splice(main_.begin(), main_, h.pos);
      continue;
    }
    if (!usable(h)) {  // leased or pinned: round again, look further
      q.splice(q.begin(), q, h.pos);
      continue;
    }
    if (from_small) Remember(GhostHash(*h.key));
    out->push_back(&h);
    if (++taken < max) q.splice(q.begin(), q, h.pos);  // not to be taken twice
  }
}

}  // namespace tierkv
