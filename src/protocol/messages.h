// Request and reply bodies of the client protocol, shared by the manager and the
// client library. Decoded string_views point into the frame buffer they came
// from and live as long as it does. docs/protocol.md is the reference.
#ifndef TIERKV_PROTOCOL_MESSAGES_H_
#define TIERKV_PROTOCOL_MESSAGES_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/codec.h"
#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv::proto {

inline constexpr uint8_t kPutUpsert = 1;  // PutFlags bit
// ALLOC / BATCH_ALLOC only: place the value in an HBM pool (a session that
// asked kHelloHbm); the reply then carries the placement (EncodePlacement).
inline constexpr uint8_t kPutHbm = 2;
inline constexpr uint8_t kPutKnownFlags = kPutUpsert;
inline constexpr uint8_t kAllocKnownFlags = kPutUpsert | kPutHbm;

// INVALID_ARGUMENT when `flags` has a bit `known` does not have.
Status CheckPutFlags(uint8_t flags, std::string_view what, uint8_t known = kPutKnownFlags);

// HELLO flag bits (the optional trailing `u8 hello_flags`).
inline constexpr uint8_t kHelloGenerations = 1;  // attach the pool's generation table
inline constexpr uint8_t kHelloHbm = 2;          // describe the HBM pools (HbmPoolInfo)

// One HBM pool, as a HELLO reply describes it to a Unix-socket client.
struct HbmPoolInfo {
  int32_t device = 0;  // the manager's ordinal of its GPU
  uint64_t capacity = 0;
  uint8_t backend = 0;               // 0 cuda, 1 host (stand-in devices)
  std::array<uint8_t, 64> handle{};  // the IPC handle of the pool's memory
};

struct HelloRequest {
  uint32_t rank = 0;
  std::string_view client_name;
  std::string_view name_space;  // optional trailing field; empty: no namespace
  uint8_t flags = 0;            // optional, after name_space (sent only when not 0)
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct HelloReply {
  uint32_t server_rank = 0;
  uint64_t pool_size = 0;
  uint8_t shm = 0;  // 1: the pool's memfd is attached (SCM_RIGHTS) to this reply
  uint32_t max_key_bytes = 0;
  uint64_t max_object_bytes = 0;
  uint32_t max_frame_bytes = 0;
  uint32_t max_batch = 0;
  uint32_t lease_ms = 0;
  uint64_t session_id = 0;
  // Present only when the request set kHelloGenerations: 1 when the pool's
  // generation table is attached as a second descriptor, and its bytes of pool
  // per generation.
  bool has_generations_fields = false;
  uint8_t generations = 0;
  uint32_t generation_page_bytes = 0;
  // Present only when the request set kHelloHbm (the generations fields are
  // then present too): the HBM pools, none over TCP or without an HBM tier.
  bool has_hbm_fields = false;
  std::vector<HbmPoolInfo> hbm_pools;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

// lease, get, exist, query, remove
// Optional trailing byte of EXIST, QUERY, BATCH_EXIST and BATCH_QUERY.
inline constexpr uint8_t kLookupLocalOnly = 1;
// LEASE and BATCH_LEASE only (a session that asked kHelloHbm): a value with
// an HBM replica is leased there; every grant then carries its placement.
inline constexpr uint8_t kLookupHbm = 2;

struct KeyRequest {
  std::string_view tenant;
  std::string_view key;
  uint8_t lookup_flags = 0;  // sent only when non-zero
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct AllocRequest {
  std::string_view tenant;
  std::string_view key;
  uint64_t size = 0;
  std::string_view group_id;
  uint8_t flags = 0;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct AllocReply {
  uint64_t alloc_id = 0;
  uint64_t offset = 0;
};

// commit, abort, release, unpin
struct IdRequest {
  uint64_t id = 0;
  void Encode(Writer& w) const;
  // `what` names the request in the error ("commit", ...).
  Status Decode(Reader& r, std::string_view what);
};

struct PutRequest {
  std::string_view tenant;
  std::string_view key;
  std::string_view group_id;
  uint8_t flags = 0;
  std::string_view value;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct LeaseReply {
  uint64_t lease_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t deadline_nanos = 0;
  uint32_t generation = 0;  // LOCATE replies only
};

struct RemoveAllRequest {
  std::string_view tenant;
  uint8_t force = 0;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct RemoveAllReply {
  uint64_t removed = 0;
  uint64_t skipped = 0;
  uint8_t cleared = 0;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct ListKeysRequest {
  std::string_view tenant;
  std::string_view prefix;
  uint32_t limit = 0;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

struct ListKeysReply {
  uint8_t truncated = 0;  // 1: more keys matched than the reply holds
  std::vector<std::string_view> keys;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

// The reply of the batch calls whose items carry no more than a status
// (batch_commit, batch_release, batch_put, batch_exist, batch_remove):
// `u32 count` and an item status each.
void EncodeStatuses(Writer& w, std::span<const Status> statuses);

// batch_lease, batch_get, batch_exist, batch_query, batch_remove
struct BatchKeysRequest {
  std::string_view tenant;
  std::vector<std::string_view> keys;
  uint8_t lookup_flags = 0;  // sent only when non-zero
  void Encode(Writer& w) const;
  Status Decode(Reader& r, uint32_t max_batch);
};

struct BatchAllocRequest {
  struct Item {
    std::string_view key;
    uint64_t size = 0;
    std::string_view group_id;
    uint8_t flags = 0;
  };
  std::string_view tenant;
  std::vector<Item> items;
  void Encode(Writer& w) const;
  Status Decode(Reader& r, uint32_t max_batch);
};

// batch_commit, batch_release
struct BatchIdsRequest {
  std::vector<uint64_t> ids;
  void Encode(Writer& w) const;
  Status Decode(Reader& r, uint32_t max_batch);
};

struct BatchPutRequest {
  struct Item {
    std::string_view key;
    std::string_view group_id;
    uint8_t flags = 0;
    std::string_view value;
    // Encode only: when not empty, the value is the concatenation of these
    // (a scatter/gather put), written as one string; `value` is ignored.
    std::span<const std::string_view> parts;
  };
  std::string_view tenant;
  std::vector<Item> items;
  void Encode(Writer& w) const;
  Status Decode(Reader& r, uint32_t max_batch);
};

// BATCH_GET_INTO: values written by the manager into the client's registered
// memory (REGISTER). Each item names where its value goes: pieces of
// registered regions, filled in order. The pieces of all items are one flat
// list; an item owns `piece_count` of them from `first_piece`.
inline constexpr uint8_t kIntoExact = 1;  // item flag: the value must fill its pieces exactly
struct GetIntoRequest {
  struct Piece {
    uint64_t region = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct Item {
    std::string_view key;
    uint8_t flags = 0;
    uint32_t first_piece = 0;
    uint32_t piece_count = 0;
  };
  std::string_view tenant;
  std::vector<Item> items;
  std::vector<Piece> pieces;
  // Wire: T, `u32 n`, n × (K, `u8 flags`, `u32 m`, m × (`u64 region`, `u64
  // offset`, `u64 length`)).
  void Encode(Writer& w) const;
  // Refuses more than `max_batch` items, more than `max_pieces` pieces in
  // all, unknown flag bits and items with no piece.
  Status Decode(Reader& r, uint32_t max_batch, uint32_t max_pieces);
};

// Client-side figures of one operation over the last report window.
struct OpWindow {
  uint8_t op = 0;                                     // 0 batch_put, 1 batch_get, 2 batch_exist
  uint64_t window_bytes = 0;                          // bytes moved in the window
  uint64_t window_duration_ms = 0;                    // summed call durations in the window
  double bytes_per_sec = 0;                           // window bytes / window wall time
  double p50_s = 0, p90_s = 0, p99_s = 0, avg_s = 0;  // call latencies
  uint64_t cum_bytes = 0;                             // since the client started
  uint64_t cum_duration_ms = 0;
};

struct ReportMetricsRequest {
  uint32_t rank = 0;
  std::vector<OpWindow> ops;
  void Encode(Writer& w) const;
  Status Decode(Reader& r);
};

// Small fixed replies and ObjectInfo, written and read field by field.
void EncodeAllocReply(Writer& w, const AllocReply& a);
AllocReply DecodeAllocReply(Reader& r);
// Where a grant is (after an alloc reply asked with kPutHbm, or a lease reply
// asked with kLookupHbm): `u8 medium` (Medium: 0 HBM, 1 DRAM) and `u32 pool`
// (an index into the HELLO reply's HBM pools; 0 for DRAM).
void EncodePlacement(Writer& w, Medium medium, uint32_t pool);
// False for a medium that is neither HBM nor DRAM.
bool DecodePlacement(Reader& r, Medium* medium, uint32_t* pool);
void EncodeLeaseReply(Writer& w, const LeaseReply& l);
LeaseReply DecodeLeaseReply(Reader& r);
// A LOCATE reply: the LEASE reply, then `u32 generation`.
void EncodeLocateReply(Writer& w, const LeaseReply& l);
LeaseReply DecodeLocateReply(Reader& r);
void EncodeObjectInfo(Writer& w, const ObjectInfo& info);
ObjectInfo DecodeObjectInfo(Reader& r);

}  // namespace tierkv::proto

#endif  // TIERKV_PROTOCOL_MESSAGES_H_
