// Fuzz target: the client protocol's header check and every body decoder.
// The first input byte picks the decoder; the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/frame.h"
#include "protocol/messages.h"

using namespace tierkv;
using namespace tierkv::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= kHeaderSize) {
    const FrameHeader h = DecodeHeader(data);
    (void)CheckHeader(h, 1 << 20);
  }
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  Reader r(body);
  switch (data[0] % 14) {
    case 0: {
      HelloRequest m;
      (void)m.Decode(r);
      break;
    }
    case 1: {
      HelloReply m;
      (void)m.Decode(r);
      break;
    }
    case 2: {
      KeyRequest m;
      (void)m.Decode(r);
      break;
    }
    case 3: {
      AllocRequest m;
      (void)m.Decode(r);
      break;
    }
    case 4: {
      PutRequest m;
      (void)m.Decode(r);
      break;
    }
    case 5: {
      BatchKeysRequest m;
      (void)m.Decode(r, 4096);
      break;
    }
    case 6: {
      BatchAllocRequest m;
      (void)m.Decode(r, 4096);
      break;
    }
    case 7: {
      BatchIdsRequest m;
      (void)m.Decode(r, 4096);
      break;
    }
    case 8: {
      BatchPutRequest m;
      (void)m.Decode(r, 4096);
      break;
    }
    case 9: {
      ReportMetricsRequest m;
      (void)m.Decode(r);
      break;
    }
    case 10: {
      RemoveAllRequest m;
      (void)m.Decode(r);
      break;
    }
    case 11: {
      ListKeysRequest m;
      (void)m.Decode(r);
      break;
    }
    case 12: {
      (void)DecodeObjectInfo(r);
      (void)DecodeLeaseReply(r);
      (void)DecodeAllocReply(r);
      break;
    }
    default: {
      while (r.ok() && !r.done()) (void)r.ItemStatus();
      break;
    }
  }
  return 0;
}
