// Plain value types shared by the tierkv client API and the manager.
//
// Thread-safety: plain values; no shared state.
#ifndef TIERKV_TYPES_H_
#define TIERKV_TYPES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tierkv {

// The tenant used when a call names none.
inline constexpr std::string_view kDefaultTenant = "default";

// Physical storage media. Numeric values are stable (wire protocol, metrics).
enum class Medium : uint8_t {
  kHbm = 0,
  kDram = 1,
  kSsd = 2,
};
inline constexpr int kMediumCount = 3;

// "hbm", "dram", "ssd".
std::string_view MediumName(Medium medium);

// Bit for `medium` in a media mask (ObjectInfo::media).
constexpr uint32_t MediumBit(Medium medium) { return 1u << static_cast<uint32_t>(medium); }

// Replica lifecycle. Numeric codes are stable and documented in docs/protocol.md.
enum class ReplicaState : uint8_t {
  kAllocated = 1,  // space reserved, bytes being written, not yet visible
  kReadable = 2,   // committed; gets see it
  kRemoving = 3,   // hidden; memory freed when the last read lease ends
};

// A storage namespace: "tierkv:v1:" then 64 lowercase hex digits (a SHA-256,
// see DeriveNamespace in tierkv/client.h). True also for "" (no namespace).
bool ValidNamespace(std::string_view ns);

// What Query reports about one object.
struct ObjectInfo {
  uint64_t size = 0;           // value length in bytes
  std::string group_id;        // as given at put; empty when none
  uint32_t media = 0;          // MediumBit() mask of the media holding a readable replica
  uint32_t active_leases = 0;  // read leases currently held on the readable replica
  ReplicaState state = ReplicaState::kReadable;
  int64_t lease_expires_unix_ms = 0;  // latest active lease's end; 0 when none
  int64_t last_access_unix_ms = 0;
  std::string name_space;  // of the put that created it ("tierkv:v1:<hex>"); empty: none
  // Cluster mode: the node id of the manager holding it when that is not the
  // one asked (empty: the manager asked holds it), and that owner's rank.
  std::string owner;
  uint32_t owner_rank = 0;
};

// Per-call lookup options of Exist/Query and their batch forms.
struct LookupOptions {
  // Answer from the manager asked only (cluster mode otherwise also consults
  // the global index of the other owners).
  bool local_only = false;
};

}  // namespace tierkv

#endif  // TIERKV_TYPES_H_
