// The peer data channel's framing (docs/cluster.md, "Data channel"): fixed
// little-endian headers, written for tierkv.
//
//   request  (48 bytes): magic "TKVD" u32 | version u16 = 1
//                        | op u16 (1 = READ, 2 = AUTHORIZE)
//                        | ticket u64 | item u32 | reserved u32 = 0
//                        | generation u64 | offset u64 | length u64
//     AUTHORIZE: item, generation and offset 0; followed by `length` bytes
//                (at most kMaxControlBytes) of an encoded authorization
//   response (24 bytes): magic "TKVR" u32 | code u32 (tierkv status code)
//                        | length u64 | reserved u64 = 0
//     code 0:  READ: `length` bytes of the object from `offset`, then the
//              xxh3-64 of those bytes (u64); AUTHORIZE: `length` bytes (at
//              most kMaxControlBytes) of the encoded answer
//     else:    `length` bytes (at most 4096) of UTF-8 error text
//
// A connection carries any number of requests, one at a time.
#ifndef TIERKV_TRANSFER_DATA_FRAME_H_
#define TIERKV_TRANSFER_DATA_FRAME_H_

#include <cstddef>
#include <cstdint>

#include "tierkv/status.h"

namespace tierkv::transfer {

inline constexpr uint32_t kRequestMagic = 0x44564B54;   // "TKVD" read as little-endian
inline constexpr uint32_t kResponseMagic = 0x52564B54;  // "TKVR"
inline constexpr uint16_t kVersion = 1;
inline constexpr uint16_t kOpRead = 1;
inline constexpr uint16_t kOpAuthorize = 2;
inline constexpr uint64_t kMaxControlBytes = uint64_t{4} << 20;
inline constexpr size_t kRequestBytes = 48;
inline constexpr size_t kResponseBytes = 24;
inline constexpr size_t kTrailerBytes = 8;
inline constexpr uint64_t kMaxErrorBytes = 4096;

// READ `length` bytes at `offset` of item `item` of grant `ticket`, whose
// value must be at `generation`.
// An AUTHORIZE carries op = kOpAuthorize, the ticket, and its payload's size
// in `length`.
struct ReadRequest {
  uint64_t ticket = 0;
  uint32_t item = 0;
  uint64_t generation = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint16_t op = kOpRead;
};

struct ResponseHead {
  uint32_t code = 0;
  uint64_t length = 0;
};

void EncodeRequest(const ReadRequest& req, uint8_t out[kRequestBytes]);
// PROTOCOL_ERROR for a wrong magic, version or op, reserved bits set, or an
// AUTHORIZE with item, generation or offset set or a payload over
// kMaxControlBytes.
Status DecodeRequest(const uint8_t in[kRequestBytes], ReadRequest* req);

void EncodeResponse(const ResponseHead& head, uint8_t out[kResponseBytes]);
// PROTOCOL_ERROR for a wrong magic, an unknown code or an oversized error text.
Status DecodeResponse(const uint8_t in[kResponseBytes], ResponseHead* head);

void PutU64(uint64_t v, uint8_t* out);
uint64_t GetU64(const uint8_t* in);

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_DATA_FRAME_H_
