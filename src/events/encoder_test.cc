#include "events/encoder.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

namespace tierkv::events {
namespace {

// Field names of an encoded event map, in order, and the map itself.
struct Decoded {
  msgpack::object_handle handle;
  std::vector<std::string> keys;
  const msgpack::object* Get(const std::string& key) const {
    const msgpack::object& payload = handle.get();
    const msgpack::object& ev = payload.via.array.ptr[1].via.array.ptr[0];
    for (uint32_t i = 0; i < ev.via.map.size; ++i) {
      if (ev.via.map.ptr[i].key.as<std::string>() == key) return &ev.via.map.ptr[i].val;
    }
    return nullptr;
  }
};

Decoded EncodeOne(const EnvelopeOptions& o, const Event& e) {
  Encoder enc(o);
  std::string out;
  Event copy = e;
  enc.Encode(std::span<const Event>(&copy, 1), 1234, &out);
  Decoded d{msgpack::unpack(out.data(), out.size()), {}};
  const msgpack::object& payload = d.handle.get();
  EXPECT_EQ(payload.type, msgpack::type::ARRAY);
  EXPECT_EQ(payload.via.array.size, 3u);
  EXPECT_EQ(payload.via.array.ptr[0].as<int64_t>(), 1234);
  EXPECT_EQ(payload.via.array.ptr[2].as<uint32_t>(), o.dp_rank);
  const msgpack::object& ev = payload.via.array.ptr[1].via.array.ptr[0];
  for (uint32_t i = 0; i < ev.via.map.size; ++i) {
    d.keys.push_back(ev.via.map.ptr[i].key.as<std::string>());
  }
  return d;
}

EnvelopeOptions Opts() {
  EnvelopeOptions o;
  o.model_name = "llama";
  o.backend_id = "node-7";
  o.dp_rank = 3;
  return o;
}

Event Stored() {
  Event e;
  e.type = EventType::kStored;
  e.event_id = 42;
  e.timestamp_ms = 1700000000123;
  e.tenant = "default";
  e.key = "prefix/abc";
  e.medium = Medium::kDram;
  return e;
}

const std::vector<std::string> kEnvelope = {
    "event_id",  "timestamp", "event_type", "model_name", "block_size", "additional_salt",
    "lora_name", "tenant_id", "backend_id", "medium",     "dp_rank"};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Encoder, StoredWithLegacyCompat) {
  Decoded d = EncodeOne(Opts(), Stored());
  EXPECT_EQ(d.keys,
            Concat(kEnvelope, {"type", "group_id", "object_key", "seq_hashes", "base_block_idx",
                               "block_hashes", "parent_hash", "token_ids", "parent_block_hash"}));
  EXPECT_EQ(d.Get("event_id")->as<uint64_t>(), 42u);
  EXPECT_EQ(d.Get("timestamp")->as<int64_t>(), 1700000000123);
  EXPECT_EQ(d.Get("event_type")->as<std::string>(), "stored");
  EXPECT_EQ(d.Get("type")->as<std::string>(), "BlockStored");
  EXPECT_EQ(d.Get("model_name")->as<std::string>(), "llama");
  EXPECT_TRUE(d.Get("block_size")->is_nil());
  EXPECT_TRUE(d.Get("additional_salt")->is_nil());
  EXPECT_TRUE(d.Get("lora_name")->is_nil());
  EXPECT_EQ(d.Get("backend_id")->as<std::string>(), "node-7");
  EXPECT_EQ(d.Get("medium")->as<std::string>(), "cpu");
  EXPECT_EQ(d.Get("dp_rank")->as<uint32_t>(), 3u);
  EXPECT_TRUE(d.Get("group_id")->is_nil());
  EXPECT_EQ(d.Get("object_key")->as<std::string>(), "prefix/abc");
  EXPECT_EQ(d.Get("seq_hashes")->via.array.size, 0u);
  EXPECT_EQ(d.Get("block_hashes")->via.array.size, 0u);
  EXPECT_TRUE(d.Get("base_block_idx")->is_nil());
  EXPECT_TRUE(d.Get("parent_hash")->is_nil());
  EXPECT_TRUE(d.Get("token_ids")->is_nil());
  EXPECT_TRUE(d.Get("parent_block_hash")->is_nil());
}

TEST(Encoder, RemovedOnDiskWithoutLegacyCompat) {
  EnvelopeOptions o = Opts();
  o.emit_legacy_compat = false;
  o.block_size = 16;
  Event e = Stored();
  e.type = EventType::kRemoved;
  e.medium = Medium::kSsd;
  e.group_id = "g";
  Decoded d = EncodeOne(o, e);
  EXPECT_EQ(d.keys, Concat(kEnvelope, {"group_id", "object_key", "seq_hashes", "base_block_idx"}));
  EXPECT_EQ(d.Get("medium")->as<std::string>(), "disk");
  EXPECT_EQ(d.Get("block_size")->as<uint32_t>(), 16u);
  EXPECT_EQ(d.Get("group_id")->as<std::string>(), "g");
  EXPECT_EQ(d.Get("type"), nullptr);
}

TEST(Encoder, ClearedIsEnvelopeOnlyWithNilMedium) {
  Event e;
  e.type = EventType::kCleared;
  e.event_id = 9;
  e.tenant = "t";
  Decoded d = EncodeOne(Opts(), e);
  EXPECT_EQ(d.keys, Concat(kEnvelope, {"type"}));
  EXPECT_TRUE(d.Get("medium")->is_nil());
  EXPECT_EQ(d.Get("type")->as<std::string>(), "AllBlocksCleared");
  EXPECT_EQ(d.Get("tenant_id")->as<std::string>(), "t");
}

TEST(Encoder, WithoutObjectKeysTheFieldIsAbsent) {
  EnvelopeOptions o = Opts();
  o.emit_object_key = false;
  Decoded d = EncodeOne(o, Stored());
  EXPECT_EQ(d.Get("object_key"), nullptr);
}

TEST(Encoder, NonUtf8KeysAreBinVerbatim) {
  Event e = Stored();
  e.key = std::string("\xff\x00k", 3);
  Decoded d = EncodeOne(Opts(), e);
  const msgpack::object* k = d.Get("object_key");
  ASSERT_EQ(k->type, msgpack::type::BIN);
  EXPECT_EQ(std::string(k->via.bin.ptr, k->via.bin.size), e.key);
}

TEST(Encoder, ManyEventsInOneMessage) {
  std::vector<Event> events(64, Stored());
  Encoder enc(Opts());
  std::string out;
  enc.Encode(events, 1, &out);
  msgpack::object_handle h = msgpack::unpack(out.data(), out.size());
  EXPECT_EQ(h.get().via.array.ptr[1].via.array.size, 64u);
}

}  // namespace
}  // namespace tierkv::events
