// KvEventPublisher: the KV event stream of the subscriber guide.
//
// It observes the store (ReplicaObserver): each replica transition becomes one
// event with a process-monotonic event_id, queued without blocking the store
// (EventQueue's drop policy). A publisher thread drains the queue in batches of
// at most 64 events and sends each batch on a ZMQ PUB socket as three frames:
// an empty topic, a big-endian u64 sequence (1, 2, 3, ... gap-free while the
// process runs, except where dropped events reserved numbers), and the
// MessagePack payload (Encoder).
//
// Optional: a replay socket (ReplayServer) that re-sends recent messages and
// snapshots of every stored object on request.
//
// Thread-safety: the observer methods and Stats are thread-safe; Start and Stop
// from one thread.
#ifndef TIERKV_EVENTS_PUBLISHER_H_
#define TIERKV_EVENTS_PUBLISHER_H_

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "events/encoder.h"
#include "events/event_queue.h"
#include "store/observer.h"
#include "tierkv/status.h"

namespace tierkv::events {

class ReplayServer;

struct PublisherOptions {
  std::string endpoint;           // ZMQ bind address, e.g. tcp://127.0.0.1:5557
  size_t queue_capacity = 65536;  // soft capacity (EventQueue)
  size_t queue_hard_limit = 0;    // 0: 2 x queue_capacity
  EnvelopeOptions envelope;
  std::string replay_endpoint;    // empty: no replay socket
  size_t replay_buffer = 4096;    // messages kept for replay
  bool snapshot_on_join = false;  // allow SNAPSHOT requests on the replay socket
  // Under load (the last message held >= kBusyMessageEvents events) a partial
  // message waits this long to fill; a trickle is sent at once.
  int batch_linger_us = 5000;
  Clock* clock = nullptr;  // null: the real clock
};

// Everything /kv_events/status and the memcache_kv_events_* metrics report.
struct PublisherStats {
  bool enabled = false;
  bool publisher_active = false;
  uint64_t published_batches = 0;
  uint64_t published_events = 0;
  std::array<uint64_t, 3> published_by_type{};    // stored, removed, cleared
  std::array<uint64_t, 4> published_by_medium{};  // hbm, dram, ssd, unknown
  uint64_t dropped_events = 0;
  uint64_t dropped_stored_events = 0;
  uint64_t dropped_high_priority_events = 0;
  uint64_t skipped_keyless_events = 0;
  uint64_t skipped_unparsed_keys = 0;  // keys are never parsed: always 0
  uint64_t queue_size = 0;
  uint64_t queue_capacity = 0;
  uint64_t last_sequence = 0;
};

// Visits every readable replica, as OnStored would announce it (for snapshots).
using SnapshotFn = std::function<void(const std::function<void(const ReplicaEvent&)>&)>;

class KvEventPublisher : public ReplicaObserver {
 public:
  KvEventPublisher(PublisherOptions options, SnapshotFn snapshot);
  ~KvEventPublisher() override;

  // Binds the sockets and starts the threads. IO_ERROR naming the endpoint when
  // a bind fails.
  Status Start();
  // Publishes what is queued (up to about a second), then closes the sockets.
  void Stop();

  void OnStored(const ReplicaEvent& event) override;
  void OnRemoved(const ReplicaEvent& event) override;
  void OnTenantCleared(std::string_view tenant) override;

  PublisherStats Stats() const;
  // The event id the next announcement will get.
  uint64_t next_event_id() const { return next_event_id_.load(std::memory_order_relaxed); }

 private:
  void Announce(EventType type, const ReplicaEvent* replica, std::string_view tenant);
  void Run();
  void Publish(std::vector<Event>& batch, uint64_t dropped);

  const PublisherOptions options_;
  Clock* const clock_;
  const Encoder encoder_;
  EventQueue queue_;
  SnapshotFn snapshot_;
  struct Zmq;
  std::unique_ptr<Zmq> zmq_;
  std::unique_ptr<ReplayServer> replay_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> next_event_id_{1};
  std::atomic<uint64_t> skipped_keyless_{0};
  // Written by the publisher thread only.
  uint64_t sequence_ = 0;
  uint64_t gap_ = 0;
  std::atomic<uint64_t> last_sequence_{0};
  std::atomic<uint64_t> published_batches_{0};
  std::atomic<uint64_t> published_events_{0};
  std::array<std::atomic<uint64_t>, 3> by_type_{};
  std::array<std::atomic<uint64_t>, 4> by_medium_{};
};

}  // namespace tierkv::events

#endif  // TIERKV_EVENTS_PUBLISHER_H_
