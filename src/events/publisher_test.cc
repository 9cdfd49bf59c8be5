// The publisher end to end in one process: a real ZMQ SUB on an ipc endpoint.
#include "events/publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <msgpack.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace tierkv::events {
namespace {

struct Message {
  uint64_t sequence;
  std::vector<std::string> types;
  std::vector<uint64_t> ids;
};

class PublisherTest : public ::testing::Test {
 protected:
  // The ipc endpoints are socket files under /tmp: remove them.
  void TearDown() override {
    pub_.reset();
    for (const std::string& e : endpoints_) unlink(e.substr(strlen("ipc://")).c_str());
  }
  void Make(size_t capacity, bool start = true) {
    endpoint_ =
        "ipc:///tmp/tierkv-pubtest-" + std::to_string(getpid()) + "-" + std::to_string(counter_++);
    endpoints_.push_back(endpoint_);
    PublisherOptions o;
    o.endpoint = endpoint_;
    o.queue_capacity = capacity;
    o.envelope.backend_id = "n";
    pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
    if (start) StartAndSubscribe();
  }
  void StartAndSubscribe() {
    ASSERT_TRUE(pub_->Start().ok());
    sub_.set(zmq::sockopt::subscribe, "");
    sub_.set(zmq::sockopt::rcvtimeo, 3000);
    sub_.connect(endpoint_);
    // PUB/SUB joins are asynchronous: announce probes until one arrives.
    for (int i = 0; i < 200; ++i) {
      pub_->OnTenantCleared("probe");
      Message m;
      sub_.set(zmq::sockopt::rcvtimeo, 20);
      if (Receive(&m)) {
        last_seq_ = m.sequence;
        break;
      }
    }
    sub_.set(zmq::sockopt::rcvtimeo, 3000);
    while (true) {  // drain remaining probes
      Message m;
      sub_.set(zmq::sockopt::rcvtimeo, 100);
      if (!Receive(&m)) break;
      last_seq_ = m.sequence;
    }
    sub_.set(zmq::sockopt::rcvtimeo, 3000);
  }
  bool Receive(Message* out) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(sub_, std::back_inserter(frames))) return false;
    EXPECT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].size(), 0u);
    EXPECT_EQ(frames[1].size(), 8u);
    uint64_t seq = 0;
    for (int i = 0; i < 8; ++i) seq = (seq << 8) | static_cast<const uint8_t*>(frames[1].data())[i];
    out->sequence = seq;
    msgpack::object_handle h =
        msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size());
    const msgpack::object& events = h.get().via.array.ptr[1];
    for (uint32_t i = 0; i < events.via.array.size; ++i) {
      const msgpack::object& ev = events.via.array.ptr[i];
      for (uint32_t j = 0; j < ev.via.map.size; ++j) {
        const std::string k = ev.via.map.ptr[j].key.as<std::string>();
        if (k == "event_type") out->types.push_back(ev.via.map.ptr[j].val.as<std::string>());
        if (k == "event_id") out->ids.push_back(ev.via.map.ptr[j].val.as<uint64_t>());
      }
    }
    return true;
  }
  // Polls `done` for up to 5 s (publisher counters trail the send slightly).
  template <typename Pred>
  static void WaitFor(Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void Stored(const std::string& key) {
    pub_->OnStored(ReplicaEvent{"default", key, "", Medium::kDram, 10});
  }

  static inline int counter_ = 0;
  std::string endpoint_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<KvEventPublisher> pub_;
  zmq::context_t ctx_;
  zmq::socket_t sub_{ctx_, zmq::socket_type::sub};
  uint64_t last_seq_ = 0;
};

TEST_F(PublisherTest, SequenceStartsAtOneAndIsGapFree) {
  Make(65536);
  EXPECT_GE(last_seq_, 1u);
  WaitFor([&] { return pub_->Stats().last_sequence >= last_seq_; });
  const PublisherStats before = pub_->Stats();
  EXPECT_EQ(before.last_sequence, last_seq_);
  EXPECT_EQ(before.published_batches, last_seq_);  // probes: one message each, from 1
  for (int i = 0; i < 10; ++i) Stored("k" + std::to_string(i));
  uint64_t seen = 0;
  uint64_t expect_seq = last_seq_ + 1;
  while (seen < 10) {
    Message m;
    ASSERT_TRUE(Receive(&m));
    EXPECT_EQ(m.sequence, expect_seq++);
    seen += m.types.size();
  }
  // The counters move right after the send, so a fast subscriber may be ahead.
  WaitFor([&] { return pub_->Stats().published_by_type[0] >= 10; });
  EXPECT_EQ(pub_->Stats().published_by_type[0], 10u);
}

TEST_F(PublisherTest, AtMost64EventsPerMessageInOrder) {
  Make(65536, /*start=*/false);
  for (int i = 0; i < 200; ++i) Stored("k" + std::to_string(i));  // queued before start
  StartAndSubscribe();  // the first messages may be missed while joining; count from stats
  const PublisherStats s = pub_->Stats();
  EXPECT_GE(s.published_batches, 4u);  // 200 events need at least 4 messages
  EXPECT_EQ(s.dropped_events, 0u);
  for (int i = 0; i < 130; ++i) Stored("again" + std::to_string(i));
  uint64_t got = 0;
  uint64_t last_id = 0;
  while (got < 130) {
    Message m;
    ASSERT_TRUE(Receive(&m));
    EXPECT_LE(m.types.size(), 64u);
    for (uint64_t id : m.ids) {
      EXPECT_GT(id, last_id);
      last_id = id;
    }
    got += m.types.size();
  }
}

TEST_F(PublisherTest, OverflowLeavesAVisibleGapMatchingTheDropCounters) {
  Make(8, /*start=*/false);
  for (int i = 0; i < 1000; ++i) Stored("k" + std::to_string(i));  // 992 dropped before start
  const PublisherStats queued = pub_->Stats();
  EXPECT_EQ(queued.dropped_events, 992u);
  EXPECT_EQ(queued.dropped_stored_events, 992u);
  EXPECT_EQ(queued.queue_size, 8u);
  // Start and listen: the 8 survivors are published after a gap of
  // ceil(992 / 64) = 16 reserved sequence numbers.
  endpoint_ += "";
  ASSERT_TRUE(pub_->Start().ok());
  sub_.set(zmq::sockopt::subscribe, "");
  sub_.connect(endpoint_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pub_->Stats().published_events < 8 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const PublisherStats s = pub_->Stats();
  EXPECT_EQ(s.published_events, 8u);
  EXPECT_EQ(s.published_batches, 1u);
  EXPECT_EQ(s.last_sequence, 1u + 16u);  // 16 reserved, then this message
}

TEST_F(PublisherTest, KeylessModeSkipsPerObjectEventsButNotCleared) {
  endpoint_ = "ipc:///tmp/tierkv-pubtest-keyless-" + std::to_string(getpid());
  endpoints_.push_back(endpoint_);
  PublisherOptions o;
  o.endpoint = endpoint_;
  o.envelope.emit_object_key = false;
  pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
  Stored("a");
  pub_->OnRemoved(ReplicaEvent{"default", "a", "", Medium::kDram, 1});
  pub_->OnTenantCleared("default");
  ASSERT_TRUE(pub_->Start().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pub_->Stats().published_events < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const PublisherStats s = pub_->Stats();
  EXPECT_EQ(s.skipped_keyless_events, 2u);
  EXPECT_EQ(s.published_events, 1u);
  EXPECT_EQ(s.published_by_type[2], 1u);    // cleared
  EXPECT_EQ(s.published_by_medium[3], 1u);  // cleared counts under "unknown"
}

TEST(PublisherStart, BadEndpointIsAnErrorNamingIt) {
  PublisherOptions o;
  o.endpoint = "tcp://256.1.1.1:1";
  KvEventPublisher p(o, nullptr);
  Status st = p.Start();
  EXPECT_EQ(st.code(), Code::kIoError);
  EXPECT_NE(st.message().find("tcp://256.1.1.1:1"), std::string::npos);
}

}  // namespace
}  // namespace tierkv::events
