#include "transfer/data_frame.h"

#include <string>

namespace tierkv::transfer {
namespace {

void PutU32(uint32_t v, uint8_t* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU16(uint16_t v, uint8_t* out) {
  out[0] = static_cast<uint8_t>(v);
  out[1] = static_cast<uint8_t>(v >> 8);
}
uint32_t GetU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}
uint16_t GetU16(const uint8_t* in) { return static_cast<uint16_t>(in[0] | (in[1] << 8)); }

Status Bad(const std::string& what) {
  return Status(Code::kProtocolError, "data channel: " + what);
}

}  // namespace

void PutU64(uint64_t v, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetU64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

void EncodeRequest(const ReadRequest& req, uint8_t out[kRequestBytes]) {
  PutU32(kRequestMagic, out);
  PutU16(kVersion, out + 4);
  PutU16(req.op, out + 6);
  PutU64(req.ticket, out + 8);
  PutU32(req.item, out + 16);
  PutU32(0, out + 20);
  PutU64(req.generation, out + 24);
  PutU64(req.offset, out + 32);
  PutU64(req.length, out + 40);
}

Status DecodeRequest(const uint8_t in[kRequestBytes], ReadRequest* req) {
  if (GetU32(in) != kRequestMagic) return Bad("not a tierkv data request (bad magic)");
  if (GetU16(in + 4) != kVersion) {
    return Bad("unsupported version " + std::to_string(GetU16(in + 4)) + " (this is 1)");
  }
  const uint16_t op = GetU16(in + 6);
  if (op != kOpRead && op != kOpAuthorize) return Bad("unknown op " + std::to_string(op));
  if (GetU32(in + 20) != 0) return Bad("reserved bits set");
  req->op = op;
  req->ticket = GetU64(in + 8);
  req->item = GetU32(in + 16);
  req->generation = GetU64(in + 24);
  req->offset = GetU64(in + 32);
  req->length = GetU64(in + 40);
  if (op == kOpAuthorize) {
    if (req->item != 0 || req->generation != 0 || req->offset != 0) {
      return Bad("an AUTHORIZE has item, generation and offset 0");
    }
    if (req->length > kMaxControlBytes) {
      return Bad("an AUTHORIZE of " + std::to_string(req->length) + " bytes (at most " +
                 std::to_string(kMaxControlBytes) + ")");
    }
  }
  return Status::Ok();
}

void EncodeResponse(const ResponseHead& head, uint8_t out[kResponseBytes]) {
  PutU32(kResponseMagic, out);
  PutU32(head.code, out + 4);
  PutU64(head.length, out + 8);
  PutU64(0, out + 16);
}

Status DecodeResponse(const uint8_t in[kResponseBytes], ResponseHead* head) {
  if (GetU32(in) != kResponseMagic) return Bad("not a tierkv data response (bad magic)");
  head->code = GetU32(in + 4);
  head->length = GetU64(in + 8);
  if (head->code > kMaxCode) return Bad("unknown status code " + std::to_string(head->code));
  if (head->code != 0 && head->length > kMaxErrorBytes) return Bad("error text too long");
  return Status::Ok();
}

}  // namespace tierkv::transfer
