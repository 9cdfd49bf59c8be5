#include "store/lru_queue.h"

#include "store/s3fifo_queue.h"

namespace tierkv {

void LruQueue::Touch(QueueHook& hook) {
  if (hook.queued) {
    list_.splice(list_.begin(), list_, hook.pos);
    return;
  }
  list_.push_front(&hook);
  hook.pos = list_.begin();
  hook.queued = true;
}

void LruQueue::Erase(QueueHook& hook) {
  if (!hook.queued) return;
  list_.erase(hook.pos);
  hook.queued = false;
}

void LruQueue::Victims(size_t max, size_t max_scan, const Usable& usable,
                       std::vector<QueueHook*>* out) {
  size_t taken = 0;
  size_t scanned = 0;
  for (auto it = list_.rbegin(); it != list_.rend() && taken < max && scanned < max_scan;
       ++it, ++scanned) {
    if (!usable(**it)) continue;
    out->push_back(*it);
    ++taken;
  }
}

std::unique_ptr<EvictionQueue> MakeEvictionQueue(EvictPolicy policy) {
  if (policy == EvictPolicy::kS3Fifo) return std::make_unique<S3FifoQueue>();
  return std::make_unique<LruQueue>();
}

}  // namespace tierkv
