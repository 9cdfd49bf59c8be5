#include "events/publisher.h"

#include <zmq.hpp>

#include "events/replay.h"

namespace tierkv::events {
namespace {

constexpr size_t kMaxEventsPerMessage = 64;
// A message sent less than this long ago means the stream is busy.
constexpr int64_t kBusyWindowNs = 20'000'000;

int MediumIndex(Medium m) {
  switch (m) {
    case Medium::kHbm:
      return 0;
    case Medium::kDram:
      return 1;
    case Medium::kSsd:
      return 2;
  }
  return 3;
}

}  // namespace

struct KvEventPublisher::Zmq {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
};

KvEventPublisher::KvEventPublisher(PublisherOptions options, SnapshotFn snapshot)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : RealClock()),
      encoder_(options_.envelope),
      queue_(options_.queue_capacity,
             options_.queue_hard_limit ? options_.queue_hard_limit : 2 * options_.queue_capacity),
      snapshot_(std::move(snapshot)) {}

KvEventPublisher::~KvEventPublisher() { Stop(); }

Status KvEventPublisher::Start() {
  zmq_ = std::make_unique<Zmq>();
  try {
    zmq_->pub.set(zmq::sockopt::sndhwm, 100000);
    zmq_->pub.set(zmq::sockopt::linger, 1000);
    zmq_->pub.bind(options_.endpoint);
  } catch (const zmq::error_t& e) {
    zmq_.reset();
    return Status(Code::kIoError, "--kv-events-endpoint " + options_.endpoint + ": " + e.what());
  }
  if (!options_.replay_endpoint.empty()) {
    replay_ = std::make_unique<ReplayServer>(
        &zmq_->context, options_.replay_endpoint, options_.replay_buffer, &encoder_, snapshot_,
        options_.snapshot_on_join, [this] { return next_event_id(); },
        [this] { return last_sequence_.load(); }, clock_);
    if (Status st = replay_->Start(); !st.ok()) {
      replay_.reset();
      zmq_.reset();
      return st;
    }
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void KvEventPublisher::Stop() {
  if (!thread_.joinable()) return;
  running_ = false;
  queue_.Close();
  thread_.join();
  if (replay_) replay_->Stop();
  replay_.reset();
  zmq_.reset();
}

void KvEventPublisher::Announce(EventType type, const ReplicaEvent* replica,
                                std::string_view tenant) {
  Event e;
  e.type = type;
  e.event_id = next_event_id_.fetch_add(1, std::memory_order_relaxed);
  e.timestamp_ms = clock_->NowUnixMillis();
  e.tenant = std::string(tenant);
  if (replica != nullptr) {
    e.medium = replica->medium;
    e.key = std::string(replica->key);
    e.group_id = std::string(replica->group_id);
  }
  queue_.Push(std::move(e));
}

void KvEventPublisher::OnStored(const ReplicaEvent& event) {
  if (!options_.envelope.emit_object_key) {
    skipped_keyless_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Announce(EventType::kStored, &event, event.tenant);
}

void KvEventPublisher::OnRemoved(const ReplicaEvent& event) {
  if (!options_.envelope.emit_object_key) {
    skipped_keyless_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Announce(EventType::kRemoved, &event, event.tenant);
}

void KvEventPublisher::OnTenantCleared(std::string_view tenant) {
  Announce(EventType::kCleared, nullptr, tenant);
}

void KvEventPublisher::Run() {
  std::vector<Event> batch;
  batch.reserve(kMaxEventsPerMessage);
  int64_t last_sent_ns = INT64_MIN / 2;
  for (;;) {
    batch.clear();
    uint64_t dropped = 0;
    // While events keep coming (a message went out within kBusyWindowNs), a
    // partial message waits up to the linger to fill: fewer, fuller messages
    // mean fewer wake-ups of this thread, the ZMQ I/O thread and subscribers,
    // which would otherwise take CPU from the threads serving clients. The first
    // event after a quiet spell goes out at once.
    const bool busy = clock_->NowNanos() - last_sent_ns < kBusyWindowNs;
    const size_t n = queue_.PopBatch(&batch, kMaxEventsPerMessage, 50, &dropped,
                                     busy ? options_.batch_linger_us : 0);
    if (n > 0) last_sent_ns = clock_->NowNanos();
    gap_ += dropped;
    if (n > 0) {
      Publish(batch, gap_);
      gap_ = 0;
    }
    if (!running_ && n == 0) break;  // closed and drained
  }
}

void KvEventPublisher::Publish(std::vector<Event>& batch, uint64_t dropped) {
  // Dropped events would have filled ceil(dropped / 64) messages: skip their
  // sequence numbers so the subscriber sees the loss.
  if (dropped > 0) sequence_ += (dropped + kMaxEventsPerMessage - 1) / kMaxEventsPerMessage;
  ++sequence_;
  std::string payload;
  encoder_.Encode(batch, clock_->NowUnixMillis(), &payload);
  uint8_t seq_be[8];
  for (int i = 0; i < 8; ++i) seq_be[i] = static_cast<uint8_t>(sequence_ >> (56 - 8 * i));
  try {
    zmq_->pub.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
    zmq_->pub.send(zmq::const_buffer(seq_be, sizeof(seq_be)), zmq::send_flags::sndmore);
    zmq_->pub.send(zmq::const_buffer(payload.data(), payload.size()), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    // PUB sockets do not fail on slow subscribers; only termination lands here.
    return;
  }
  if (replay_) replay_->Append(sequence_, payload);
  last_sequence_.store(sequence_, std::memory_order_relaxed);
  published_batches_.fetch_add(1, std::memory_order_relaxed);
  published_events_.fetch_add(batch.size(), std::memory_order_relaxed);
  for (const Event& e : batch) {
    by_type_[static_cast<int>(e.type)].fetch_add(1, std::memory_order_relaxed);
    by_medium_[e.type == EventType::kCleared ? 3 : MediumIndex(e.medium)].fetch_add(
        1, std::memory_order_relaxed);
  }
}

PublisherStats KvEventPublisher::Stats() const {
  PublisherStats s;
  s.enabled = true;
  s.publisher_active = running_.load() && thread_.joinable();
  s.published_batches = published_batches_.load(std::memory_order_relaxed);
  s.published_events = published_events_.load(std::memory_order_relaxed);
  for (int i = 0; i < 3; ++i) s.published_by_type[i] = by_type_[i].load(std::memory_order_relaxed);
  for (int i = 0; i < 4; ++i) {
    s.published_by_medium[i] = by_medium_[i].load(std::memory_order_relaxed);
  }
  const QueueStats q = queue_.Stats();
  s.dropped_events = q.dropped;
  s.dropped_stored_events = q.dropped_stored;
  s.dropped_high_priority_events = q.dropped_high_priority;
  s.queue_size = q.size;
  s.queue_capacity = queue_.soft_capacity();
  s.skipped_keyless_events = skipped_keyless_.load(std::memory_order_relaxed);
  s.last_sequence = last_sequence_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tierkv::events
