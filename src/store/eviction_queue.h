// EvictionQueue: the order in which one shard's replicas on a medium become
// victims. The store keeps one per shard for DRAM (LruQueue or S3FifoQueue,
// by --evict-policy) and an LruQueue for SSD; docs/store.md, "Eviction".
//
// Elements are the store's map nodes, each through a QueueHook it embeds (an
// intrusive element: queuing allocates one list node, touching a queued
// element allocates nothing). The queue decides only the order; whether a
// candidate may go (leased, pinned) is the caller's `usable`.
//
// Thread-safety: none; a queue is guarded by its shard's mutex.
#ifndef TIERKV_STORE_EVICTION_QUEUE_H_
#define TIERKV_STORE_EVICTION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "store/store_types.h"

namespace tierkv {

struct QueueHook {
  void* owner = nullptr;             // the element (the store's map node); set before Touch
  const std::string* key = nullptr;  // its key, stable while it is queued
  std::list<QueueHook*>::iterator pos;
  bool queued = false;
  bool probation = false;  // S3-FIFO: in the small probation FIFO
  uint8_t freq = 0;        // S3-FIFO: reads since it entered its FIFO (at most 3)
};

class EvictionQueue {
 public:
  using Usable = std::function<bool(const QueueHook&)>;

  virtual ~EvictionQueue() = default;
  // A read of the element, or its new value: queued where the policy puts
  // new elements, or, queued already, its recency or frequency noted.
  virtual void Touch(QueueHook& hook) = 0;
  // Takes the element out; nothing when it is not queued.
  virtual void Erase(QueueHook& hook) = 0;
  // Appends to `out` up to `max` victims, first to go first, each one that
  // `usable` accepts, looking at no more than about `max_scan` elements. The
  // queue may reorder itself while it looks (S3-FIFO promotes and rotates).
  virtual void Victims(size_t max, size_t max_scan, const Usable& usable,
                       std::vector<QueueHook*>* out) = 0;
  virtual size_t size() const = 0;
};

// The DRAM queue of `policy`.
std::unique_ptr<EvictionQueue> MakeEvictionQueue(EvictPolicy policy);

}  // namespace tierkv

#endif  // TIERKV_STORE_EVICTION_QUEUE_H_
