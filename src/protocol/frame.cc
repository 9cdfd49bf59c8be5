#include "protocol/frame.h"

#include <cstring>

namespace tierkv::proto {

std::string_view OpcodeName(uint16_t opcode) {
  switch (static_cast<Opcode>(opcode)) {
#define TIERKV_OPCODE_NAME(name, value, wire, tracepoint) \
  case Opcode::name:                                      \
    return wire;
    TIERKV_OPCODES(TIERKV_OPCODE_NAME)
#undef TIERKV_OPCODE_NAME
    case Opcode::kFatal:
      return "fatal";
  }
  return "unknown";
}

std::string_view OpcodeTracepoint(uint16_t opcode) {
  switch (static_cast<Opcode>(opcode)) {
#define TIERKV_OPCODE_TRACEPOINT(name, value, wire, tracepoint) \
  case Opcode::name:                                            \
    return tracepoint;
    TIERKV_OPCODES(TIERKV_OPCODE_TRACEPOINT)
#undef TIERKV_OPCODE_TRACEPOINT
    case Opcode::kFatal:
      break;
  }
  return {};
}

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  std::memcpy(out + 0, &h.magic, 2);
  out[2] = h.version;
  out[3] = h.flags;
  std::memcpy(out + 4, &h.opcode, 2);
  std::memcpy(out + 6, &h.status, 2);
  std::memcpy(out + 8, &h.request_id, 8);
  std::memcpy(out + 16, &h.body_len, 4);
  std::memcpy(out + 20, &h.reserved, 4);
}

FrameHeader DecodeHeader(const uint8_t in[kHeaderSize]) {
  FrameHeader h;
  std::memcpy(&h.magic, in + 0, 2);
  h.version = in[2];
  h.flags = in[3];
  std::memcpy(&h.opcode, in + 4, 2);
  std::memcpy(&h.status, in + 6, 2);
  std::memcpy(&h.request_id, in + 8, 8);
  std::memcpy(&h.body_len, in + 16, 4);
  std::memcpy(&h.reserved, in + 20, 4);
  return h;
}

Status CheckHeader(const FrameHeader& h, uint32_t max_body_len) {
  if (h.magic != kMagic) {
    return Status(Code::kProtocolError, "bad frame magic (not a tierkv client?)");
  }
  if (h.version != kProtocolVersion) {
    return Status(Code::kProtocolError, "unsupported protocol version " +
                                            std::to_string(h.version) + " (this side speaks " +
                                            std::to_string(kProtocolVersion) + ")");
  }
  if (h.body_len > max_body_len) {
    return Status(Code::kTooLarge, "frame body of " + std::to_string(h.body_len) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(max_body_len));
  }
  return Status::Ok();
}

void AppendFrame(std::string* out, const FrameHeader& h, std::string_view body) {
  uint8_t hdr[kHeaderSize];
  FrameHeader copy = h;
  copy.body_len = static_cast<uint32_t>(body.size());
  EncodeHeader(copy, hdr);
  out->append(reinterpret_cast<const char*>(hdr), kHeaderSize);
  out->append(body);
}

std::string FatalFrame(const Status& status) {
  std::string body;
  const std::string& msg = status.message();
  const auto n = static_cast<uint32_t>(msg.size());
  body.append(reinterpret_cast<const char*>(&n), 4);
  body.append(msg);
  FrameHeader h;
  h.flags = kFlagResponse;
  h.opcode = static_cast<uint16_t>(Opcode::kFatal);
  h.status = static_cast<uint16_t>(status.code());
  std::string frame;
  AppendFrame(&frame, h, body);
  return frame;
}

FrameHeader ResponseHeader(const FrameHeader& request, Code status, uint32_t body_len) {
  FrameHeader h;
  h.flags = kFlagResponse;
  h.opcode = request.opcode;
  h.status = static_cast<uint16_t>(status);
  h.request_id = request.request_id;
  h.body_len = body_len;
  return h;
}

}  // namespace tierkv::proto
