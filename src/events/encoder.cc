#include "events/encoder.h"

#include <msgpack.hpp>

namespace tierkv::events {
namespace {

// A std::string-backed buffer for msgpack::packer.
struct StringBuffer {
  std::string* out;
  void write(const char* data, size_t n) { out->append(data, n); }
};

using Packer = msgpack::packer<StringBuffer>;

void PackStr(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void PackOptStr(Packer& pk, const std::optional<std::string>& s) {
  if (s) {
    PackStr(pk, *s);
  } else {
    pk.pack_nil();
  }
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) >> 6) != 0x2) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

Encoder::Encoder(EnvelopeOptions options) : options_(std::move(options)) {
  const EnvelopeOptions& o = options_;
  for (int t = 0; t < kTypes; ++t) {
    const auto type = static_cast<EventType>(t);
    const bool per_object = type != EventType::kCleared;
    const bool stored = type == EventType::kStored;
    uint32_t fields = 11;
    if (o.emit_legacy_compat) fields += 1;  // type
    if (per_object) {
      fields += 3;  // group_id, seq_hashes, base_block_idx
      if (o.emit_object_key) fields += 1;
      if (o.emit_legacy_compat) fields += 1;  // block_hashes
      if (stored) fields += 2 + (o.emit_legacy_compat ? 1 : 0);
    }
    {
      StringBuffer buf{&head_[t]};
      Packer pk(buf);
      pk.pack_map(fields);
      PackStr(pk, "event_id");
    }
    {
      StringBuffer buf{&after_timestamp_[t]};
      Packer pk(buf);
      PackStr(pk, "event_type");
      PackStr(pk, EventTypeName(type));
      PackStr(pk, "model_name");
      PackOptStr(pk, o.model_name);
      PackStr(pk, "block_size");
      if (o.block_size == 0) {
        pk.pack_nil();
      } else {
        pk.pack_uint32(o.block_size);
      }
      PackStr(pk, "additional_salt");
      PackOptStr(pk, o.additional_salt);
      PackStr(pk, "lora_name");
      PackOptStr(pk, o.lora_name);
      PackStr(pk, "tenant_id");
    }
    for (int m = 0; m < kMedia; ++m) {
      StringBuffer buf{&after_tenant_[t][m]};
      Packer pk(buf);
      PackStr(pk, "backend_id");
      PackStr(pk, o.backend_id);
      PackStr(pk, "medium");
      if (per_object) {
        PackStr(pk, WireMedium(static_cast<Medium>(m)));
      } else {
        pk.pack_nil();
      }
      PackStr(pk, "dp_rank");
      pk.pack_uint32(o.dp_rank);
      if (o.emit_legacy_compat) {
        PackStr(pk, "type");
        PackStr(pk, LegacyTypeName(type));
      }
      if (per_object) PackStr(pk, "group_id");
    }
    if (per_object) {
      StringBuffer buf{&tail_[t]};
      Packer pk(buf);
      PackStr(pk, "seq_hashes");
      pk.pack_array(0);
      PackStr(pk, "base_block_idx");
      pk.pack_nil();
      if (o.emit_legacy_compat) {
        PackStr(pk, "block_hashes");
        pk.pack_array(0);
      }
      if (stored) {
        PackStr(pk, "parent_hash");
        pk.pack_nil();
        PackStr(pk, "token_ids");
        pk.pack_nil();
        if (o.emit_legacy_compat) {
          PackStr(pk, "parent_block_hash");
          pk.pack_nil();
        }
      }
    }
  }
}

void Encoder::Encode(std::span<const Event> events, int64_t timestamp_ms, std::string* out) const {
  StringBuffer buf{out};
  Packer pk(buf);
  pk.pack_array(3);
  pk.pack_int64(timestamp_ms);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const Event& e : events) {
    const int t = static_cast<int>(e.type);
    const int m = e.type == EventType::kCleared ? 0 : static_cast<int>(e.medium);
    out->append(head_[t]);
    pk.pack_uint64(e.event_id);
    PackStr(pk, "timestamp");
    pk.pack_int64(e.timestamp_ms);
    out->append(after_timestamp_[t]);
    PackStr(pk, e.tenant);
    out->append(after_tenant_[t][m]);
    if (e.type == EventType::kCleared) continue;
    if (e.group_id.empty()) {
      pk.pack_nil();
    } else {
      PackStr(pk, e.group_id);
    }
    if (options_.emit_object_key) {
      PackStr(pk, "object_key");
      if (ValidUtf8(e.key)) {
        PackStr(pk, e.key);
      } else {
        pk.pack_bin(static_cast<uint32_t>(e.key.size()));
        pk.pack_bin_body(e.key.data(), static_cast<uint32_t>(e.key.size()));
      }
    }
    out->append(tail_[t]);
  }
  pk.pack_uint32(options_.dp_rank);
}

}  // namespace tierkv::events
