// The client protocol's frame: a fixed 24-byte header and a body.
//
//   offset size field
//   0      2    magic       0x4B54 (bytes 'T' 'K')
//   2      1    version     kProtocolVersion
//   3      1    flags       bit 0: response
//   4      2    opcode      Opcode
//   6      2    status      responses: a tierkv::Code; requests: 0
//   8      8    request_id  chosen by the client, echoed in the response
//   16     4    body_len    bytes that follow the header
//   20     4    reserved    0
//
// All integers little-endian. docs/protocol.md documents every body.
#ifndef TIERKV_PROTOCOL_FRAME_H_
#define TIERKV_PROTOCOL_FRAME_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/opcodes.h"
#include "tierkv/status.h"

namespace tierkv::proto {

inline constexpr uint16_t kMagic = 0x4B54;
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 24;
inline constexpr uint8_t kFlagResponse = 1;

// Request kinds (protocol/opcodes.h), and kFatal: sent by the manager,
// request_id 0, just before it closes a connection whose byte stream it can no
// longer trust (bad magic, version, oversize length).
enum class Opcode : uint16_t {
#define TIERKV_OPCODE_ENUM(name, value, wire, tracepoint) name = value,
  TIERKV_OPCODES(TIERKV_OPCODE_ENUM)
#undef TIERKV_OPCODE_ENUM
      kFatal = 0xFFFF,
};

// "alloc", "batch_get", ...; "unknown" for anything else.
std::string_view OpcodeName(uint16_t opcode);
// The latency tracepoint a request kind is counted under
// ("TP_MMC_META_GET", ...); empty for kFatal and unknown opcodes.
std::string_view OpcodeTracepoint(uint16_t opcode);

struct FrameHeader {
  uint16_t magic = kMagic;
  uint8_t version = kProtocolVersion;
  uint8_t flags = 0;
  uint16_t opcode = 0;
  uint16_t status = 0;
  uint64_t request_id = 0;
  uint32_t body_len = 0;
  uint32_t reserved = 0;
};

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]);
FrameHeader DecodeHeader(const uint8_t in[kHeaderSize]);

// Checks magic, version and length. A failure here means the stream can no
// longer be framed: the receiver answers with kFatal and closes.
Status CheckHeader(const FrameHeader& h, uint32_t max_body_len);

// Appends a complete frame (header + body) to `out`.
void AppendFrame(std::string* out, const FrameHeader& h, std::string_view body);

// A complete kFatal frame carrying `status` (code and message).
std::string FatalFrame(const Status& status);

// A response header for `request` with the given status and body length.
FrameHeader ResponseHeader(const FrameHeader& request, Code status, uint32_t body_len);

}  // namespace tierkv::proto

#endif  // TIERKV_PROTOCOL_FRAME_H_
