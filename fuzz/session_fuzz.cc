// Fuzz target: a client's byte stream, cut into frames as a Session cuts it
// (header checked before anything is allocated), each run by a
// RequestHandler against a real store: no server, no socket. The handler is
// a Unix-socket one, so shared-memory operations are allowed. The store
// lives across inputs, as a manager's does across clients.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "server/client_metrics.h"
#include "server/request_handler.h"
#include "server/server.h"
#include "store/store.h"

using namespace tierkv;

namespace {

struct World {
  std::unique_ptr<Store> store;
  ServerOptions options;
  ClientMetrics metrics;
  World() {
    auto pool = DramPool::Create(16 << 20);
    StoreOptions o;
    o.max_object_bytes = 4 << 20;
    store = std::move(Store::Create(o, std::move(*pool))).value();
    options.max_frame_bytes = 5 << 20;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  static uint64_t session_id = 1;
  // Every input starts after a valid HELLO, so the fuzzer explores the
  // requests behind the handshake.
  RequestHandler handler({&world->options, world->store.get(), &world->metrics, nullptr},
                         /*shm=*/true, session_id++);
  std::string reply;
  {
    std::string body;
    proto::Writer w(&body);
    proto::HelloRequest{0, "fuzz", {}}.Encode(w);
    proto::FrameHeader h;
    h.opcode = static_cast<uint16_t>(proto::Opcode::kHello);
    if (!handler.Handle(h, body, &reply).ok()) __builtin_trap();
  }
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (in.size() >= proto::kHeaderSize) {
    const proto::FrameHeader h = proto::DecodeHeader(reinterpret_cast<const uint8_t*>(in.data()));
    if (!proto::CheckHeader(h, world->options.max_frame_bytes).ok()) break;  // fatal: closed
    in.remove_prefix(proto::kHeaderSize);
    if (h.body_len > in.size()) break;  // the stream ends mid-frame
    reply.clear();
    (void)handler.Handle(h, in.substr(0, h.body_len), &reply);
    in.remove_prefix(h.body_len);
  }
  return 0;
}
