// Fuzz target: a whole client byte stream through a real Session against a
// real store (Unix-socket session, so shared-memory operations are allowed).
// The store lives across inputs, as a manager's does across clients.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/socket_io.h"
#include "server/server.h"
#include "server/session.h"
#include "store/store.h"

using namespace tierkv;

namespace {

struct World {
  std::unique_ptr<Store> store;
  std::unique_ptr<Server> server;
  World() {
    auto pool = DramPool::Create(16 << 20);
    StoreOptions o;
    o.max_object_bytes = 4 << 20;
    store = std::move(Store::Create(o, std::move(*pool))).value();
    ServerOptions so;
    so.max_frame_bytes = 5 << 20;
    so.io_timeout_ms = 200;
    so.spin_us = 0;
    server = std::make_unique<Server>(so, store.get());  // never started: sessions only
    std::string body;
    proto::Writer w(&body);
    proto::HelloRequest{0, "fuzz", {}}.Encode(w);
    proto::FrameHeader h;
    h.opcode = static_cast<uint16_t>(proto::Opcode::kHello);
    proto::AppendFrame(&hello, h, body);
  }
  std::string hello;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  static uint64_t session_id = 1;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  // The "client": sends the input, then drains every reply until the session ends.
  // Every input starts after a valid HELLO, so the fuzzer explores the requests
  // behind the handshake (a stream without one ends at its first frame).
  std::thread client([&] {
    (void)proto::WriteFull(fds[0], world->hello.data(), world->hello.size(), 1000);
    (void)proto::WriteFull(fds[0], data, size, 1000);
    shutdown(fds[0], SHUT_WR);
    char buf[65536];
    while (recv(fds[0], buf, sizeof(buf), 0) > 0) {
    }
  });
  {
    Session s(world->server.get(), world->store.get(), fds[1], /*unix_socket=*/true, session_id++);
    s.Run();
  }
  shutdown(fds[1], SHUT_RDWR);
  client.join();
  close(fds[0]);
  close(fds[1]);
  return 0;
}
