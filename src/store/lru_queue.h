// LruQueue: least recently used first. A touch moves the element to the
// front; victims come from the back, skipping those not usable.
#ifndef TIERKV_STORE_LRU_QUEUE_H_
#define TIERKV_STORE_LRU_QUEUE_H_

#include "store/eviction_queue.h"

namespace tierkv {

class LruQueue final : public EvictionQueue {
 public:
  void Touch(QueueHook& hook) override;
  void Erase(QueueHook& hook) override;
  void Victims(size_t max, size_t max_scan, const Usable& usable,
               std::vector<QueueHook*>* out) override;
  size_t size() const override { return list_.size(); }

 private:
  std::list<QueueHook*> list_;  // front = most recent
};

}  // namespace tierkv

#endif  // TIERKV_STORE_LRU_QUEUE_H_
