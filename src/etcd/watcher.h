// Watcher: follows every key under one etcd prefix.
//
// It owns its resume revision (the newest revision it has delivered). It starts
// with a range of the prefix (reset), then watches from the next revision. A
// watch answered with compact_revision (the history it needs is gone) is
// recovered by a new range (reset) and a watch from that range's revision; a
// stream that fails is reopened on the next endpoint from the resume revision.
// Independently, the prefix is re-read every `resync_ms` and delivered as a
// reset unless the watch has already delivered something newer, because etcd 3.4 has known bugs
// that can lose watch events; consumers therefore treat a reset as the whole
// truth and drop what it does not list.
//
// Callbacks are serialized (one at a time, in revision order) and run on the
// watcher's threads; they must return quickly and must not call Stop().
//
// Thread-safety: Start/Stop from one thread; accessors from any.
#ifndef TIERKV_ETCD_WATCHER_H_
#define TIERKV_ETCD_WATCHER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/scheduler.h"
#include "etcd/etcd_client.h"

namespace tierkv::etcd {

struct WatchEvent {
  bool put = true;  // false: the key was deleted (kv.value is empty)
  KeyValue kv;      // kv.mod_revision is the event's revision
};

struct WatchCallbacks {
  // Everything under the prefix at `revision`.
  std::function<void(const std::vector<KeyValue>& kvs, int64_t revision)> reset;
  // Changes after the last delivered revision, up to `revision`.
  std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> events;
};

class Watcher {
 public:
  // `scheduler` runs the resync every resync_ms (0: never); null: ThreadScheduler().
  Watcher(Client* client, std::string prefix, int64_t resync_ms, Scheduler* scheduler = nullptr)
      : client_(client),
        prefix_(std::move(prefix)),
        resync_ms_(resync_ms),
        scheduler_(scheduler ? scheduler : ThreadScheduler()) {}
  ~Watcher() { Stop(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Reads the prefix once (the first reset is delivered before Start returns
  // when etcd answers within the call deadline), then follows it.
  void Start(WatchCallbacks callbacks);
  void Stop();

  int64_t revision() const { return applied_.load(std::memory_order_acquire); }
  // True while a watch stream is open and created.
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  uint64_t compactions() const { return compactions_.load(std::memory_order_relaxed); }
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }
  uint64_t resyncs() const { return resyncs_.load(std::memory_order_relaxed); }

 private:
  void RunWatch();  // the watch thread: a blocking stream, reopened until Stop
  bool Reset();     // range + reset callback; false when etcd did not answer
  bool Watch();     // one stream; false when stopping
  bool Pause(std::chrono::milliseconds ms);  // false when stopping

  Client* const client_;
  const std::string prefix_;
  const int64_t resync_ms_;
  Scheduler* const scheduler_;
  WatchCallbacks callbacks_;
  std::mutex apply_mu_;  // serializes callbacks and applied_
  std::atomic<int64_t> applied_{0};
  std::atomic<bool> connected_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  void* context_ = nullptr;  // the open stream's grpc::ClientContext (mu_)
  std::thread watch_thread_;
  std::unique_ptr<PeriodicTask> resync_;
  std::atomic<uint64_t> compactions_{0}, reconnects_{0}, resyncs_{0};
};

}  // namespace tierkv::etcd

#endif  // TIERKV_ETCD_WATCHER_H_
