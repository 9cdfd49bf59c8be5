// ReplayServer: an opt-in ZMQ ROUTER beside the PUB socket, for subscribers
// that saw a gap or joined late.
//
// Requests (from a DEALER or REQ-less ROUTER peer), after the routing frames:
//   ["REPLAY", u64 BE since]  every kept message with sequence >= since
//   ["SNAPSHOT"]              every stored object as `stored` events
// Replies, each prefixed with the requester's routing frames:
//   ["MSG", u64 BE sequence, payload]  one per message (sequence 0 in snapshots)
//   ["END", u64 BE first_kept, u64 BE last_sequence, u64 BE event_id_watermark]
//   ["ERR", text]                      unknown command or snapshots disabled
// A replay is complete when first_kept <= since (else messages before
// first_kept are gone). After a snapshot, apply live events whose event_id is
// >= event_id_watermark on top of it. docs/kv-events.md has the details.
//
// Thread-safety: Append is thread-safe; Start/Stop from one thread.
#ifndef TIERKV_EVENTS_REPLAY_H_
#define TIERKV_EVENTS_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "events/encoder.h"
#include "events/publisher.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace tierkv::events {

class ReplayServer {
 public:
  ReplayServer(zmq::context_t* context, std::string endpoint, size_t capacity,
               const Encoder* encoder, SnapshotFn snapshot, bool snapshot_enabled,
               std::function<uint64_t()> next_event_id, std::function<uint64_t()> last_sequence,
               Clock* clock);
  ~ReplayServer();

  Status Start();
  void Stop();
  // Keeps a published message (called by the publisher thread).
  void Append(uint64_t sequence, const std::string& payload);

 private:
  void Run();

  zmq::context_t* const context_;
  const std::string endpoint_;
  const size_t capacity_;
  const Encoder* const encoder_;
  SnapshotFn snapshot_;
  const bool snapshot_enabled_;
  std::function<uint64_t()> next_event_id_;
  std::function<uint64_t()> last_sequence_;
  Clock* const clock_;
  std::mutex mu_;
  std::deque<std::pair<uint64_t, std::string>> ring_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::unique_ptr<zmq::socket_t> socket_;  // bound in Start, then used by the replay thread only
};

}  // namespace tierkv::events

#endif  // TIERKV_EVENTS_REPLAY_H_
