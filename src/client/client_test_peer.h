// Test seams of tierkv::Client (not part of the public API).
#ifndef TIERKV_CLIENT_CLIENT_TEST_PEER_H_
#define TIERKV_CLIENT_CLIENT_TEST_PEER_H_

#include <functional>
#include <memory>

#include "device/device.h"
#include "tierkv/client.h"

namespace tierkv {

class ClientTestPeer {
 public:
  // Runs `hook` in Get and BatchGet after a lease-free copy and before its
  // generation is checked (empty: nothing), on the calling thread. Set it
  // while no call is running on `client`.
  static void SetAfterLocatedCopy(Client& client, std::function<void()> hook);
  // Replaces the device that copies GPU memory (ClientOptions::device_copies)
  // with `device` (tests: one whose copies fail).
  static void SetDevice(Client& client, std::unique_ptr<Device> device);
};

}  // namespace tierkv

#endif  // TIERKV_CLIENT_CLIENT_TEST_PEER_H_
