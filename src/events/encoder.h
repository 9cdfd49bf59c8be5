// Encodes a batch of events as the subscriber guide's MessagePack payload:
// [timestamp_ms, [event_map, ...], dp_rank].
//
// Field order in each map: event_id, timestamp, event_type, model_name,
// block_size, additional_salt, lora_name, tenant_id, backend_id, medium,
// dp_rank, then (legacy compat) type; stored/removed add group_id, object_key
// (unless keys are suppressed), seq_hashes, base_block_idx and (legacy)
// block_hashes; stored adds parent_hash, token_ids and (legacy)
// parent_block_hash. cleared carries none of the per-object keys (absent, not
// nil) and medium nil.
//
// object_key is the store key verbatim: a MessagePack str when it is valid
// UTF-8, bin otherwise. group_id is nil when the object has none.
//
// Thread-safety: an Encoder is immutable after construction; Encode is const.
#ifndef TIERKV_EVENTS_ENCODER_H_
#define TIERKV_EVENTS_ENCODER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "events/event.h"

namespace tierkv::events {

struct EnvelopeOptions {
  std::optional<std::string> model_name;       // nil when unset
  uint32_t block_size = 0;                     // nil when 0
  std::optional<std::string> additional_salt;  // nil when unset
  std::optional<std::string> lora_name;        // nil when unset
  std::string backend_id;                      // the node id
  uint32_t dp_rank = 0;
  bool emit_legacy_compat = true;
  bool emit_object_key = true;
};

// Everything in an event map that does not depend on the event itself is
// packed once, at construction, into byte runs per event type (and medium);
// encoding an event then appends those runs around its few variable values.
class Encoder {
 public:
  explicit Encoder(EnvelopeOptions options);

  // Appends the payload for `events` (at most 64) to *out.
  void Encode(std::span<const Event> events, int64_t timestamp_ms, std::string* out) const;

  const EnvelopeOptions& options() const { return options_; }

 private:
  static constexpr int kTypes = 3;
  static constexpr int kMedia = 3;  // by Medium
  EnvelopeOptions options_;
  // map header + "event_id" key
  std::string head_[kTypes];
  // event_type .. lora_name pairs + "tenant_id" key
  std::string after_timestamp_[kTypes];
  // backend_id, medium, dp_rank (+ legacy type), and for per-object events the
  // "group_id" key
  std::string after_tenant_[kTypes][kMedia];
  // per-object events: seq_hashes .. parent_block_hash
  std::string tail_[kTypes];
};

}  // namespace tierkv::events

#endif  // TIERKV_EVENTS_ENCODER_H_
