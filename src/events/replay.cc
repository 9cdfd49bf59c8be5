#include "events/replay.h"

#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace tierkv::events {
namespace {

std::string U64Be(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

uint64_t ParseU64Be(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const uint8_t*>(m.data());
  for (size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

ReplayServer::ReplayServer(zmq::context_t* context, std::string endpoint, size_t capacity,
                           const Encoder* encoder, SnapshotFn snapshot, bool snapshot_enabled,
                           std::function<uint64_t()> next_event_id,
                           std::function<uint64_t()> last_sequence, Clock* clock)
    : context_(context),
      endpoint_(std::move(endpoint)),
      capacity_(std::max<size_t>(1, capacity)),
      encoder_(encoder),
      snapshot_(std::move(snapshot)),
      snapshot_enabled_(snapshot_enabled),
      next_event_id_(std::move(next_event_id)),
      last_sequence_(std::move(last_sequence)),
      clock_(clock) {}

ReplayServer::~ReplayServer() { Stop(); }

Status ReplayServer::Start() {
  socket_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::router);
  try {
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::rcvtimeo, 100);
    socket_->bind(endpoint_);
  } catch (const zmq::error_t& e) {
    socket_.reset();
    return Status(Code::kIoError, "--kv-events-replay-endpoint " + endpoint_ + ": " + e.what());
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ReplayServer::Stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  socket_.reset();
}

void ReplayServer::Append(uint64_t sequence, const std::string& payload) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.emplace_back(sequence, payload);
  while (ring_.size() > capacity_) ring_.pop_front();
}

void ReplayServer::Run() {
  while (running_) {
    std::vector<zmq::message_t> request;
    zmq::recv_result_t got;
    try {
      got = zmq::recv_multipart(*socket_, std::back_inserter(request));
    } catch (const zmq::error_t&) {
      break;
    }
    if (!got || request.empty()) continue;  // timeout: check running_
    // Routing frames end at the first empty delimiter (REQ/DEALER with one), or
    // are just the identity (plain DEALER).
    size_t cmd_at = 1;
    for (size_t i = 1; i < request.size(); ++i) {
      if (request[i].size() == 0) {
        cmd_at = i + 1;
        break;
      }
    }
    std::vector<zmq::message_t> route;
    for (size_t i = 0; i < cmd_at && i < request.size(); ++i)
      route.emplace_back(request[i].data(), request[i].size());
    auto reply = [&](std::vector<std::string> frames) {
      std::vector<zmq::const_buffer> parts;
      for (auto& r : route) parts.emplace_back(r.data(), r.size());
      for (auto& f : frames) parts.emplace_back(f.data(), f.size());
      zmq::send_multipart(*socket_, parts);
    };
    const std::string cmd = cmd_at < request.size() ? request[cmd_at].to_string() : "";
    try {
      if (cmd == "REPLAY" && cmd_at + 1 < request.size()) {
        const uint64_t since = ParseU64Be(request[cmd_at + 1]);
        std::vector<std::pair<uint64_t, std::string>> copy;
        uint64_t first_kept = 0;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!ring_.empty()) first_kept = ring_.front().first;
          for (const auto& m : ring_) {
            if (m.first >= since) copy.push_back(m);
          }
        }
        for (auto& [seq, payload] : copy) reply({"MSG", U64Be(seq), payload});
        reply({"END", U64Be(first_kept), U64Be(last_sequence_()), U64Be(next_event_id_())});
      } else if (cmd == "SNAPSHOT") {
        if (!snapshot_enabled_) {
          reply({"ERR", "snapshots are disabled (--kv-events-snapshot-on-join)"});
          continue;
        }
        // The event-id watermark W is read before the store's snapshot reads its
        // own watermark S (the snapshot is StoreAdmin::Snapshot, through
        // ForEachReadable): a change after S gets its event id after W, so
        // events >= W cover everything the pages leave out (no gap); a change
        // between the two reads may come both ways, a repeat the guide
        // tolerates.
        const uint64_t watermark = next_event_id_();
        const uint64_t last = last_sequence_();
        std::vector<Event> batch;
        auto flush = [&] {
          if (batch.empty()) return;
          std::string payload;
          encoder_->Encode(batch, clock_->NowUnixMillis(), &payload);
          reply({"MSG", U64Be(0), payload});
          batch.clear();
        };
        snapshot_([&](const ReplicaEvent& r) {
          Event e;
          e.type = EventType::kStored;
          e.event_id = 0;
          e.timestamp_ms = clock_->NowUnixMillis();
          e.medium = r.medium;
          e.tenant = std::string(r.tenant);
          e.key = std::string(r.key);
          e.group_id = std::string(r.group_id);
          batch.push_back(std::move(e));
          if (batch.size() == 64) flush();
        });
        flush();
        uint64_t first_kept = 0;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!ring_.empty()) first_kept = ring_.front().first;
        }
        reply({"END", U64Be(first_kept), U64Be(last), U64Be(watermark)});
      } else {
        reply({"ERR", "unknown request '" + cmd + "' (expected REPLAY <u64 since> or SNAPSHOT)"});
      }
    } catch (const zmq::error_t&) {
      // The requester went away mid-reply; nothing to clean up.
    }
  }
}

}  // namespace tierkv::events
