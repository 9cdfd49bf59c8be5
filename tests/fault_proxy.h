// FaultProxy: a loopback TCP proxy placed in front of a server (etcd's client
// port, a peer) to cut it off from one client:
//   kPass      forwards both ways;
//   kBlackhole accepts and keeps connections but forwards nothing (a partition
//              that drops packets: the client times out);
//   kReset     resets every connection and each new one at once (a partition
//              that refuses).
// Thread-safety: SetMode from any thread; once it returns, no byte read before
// the change is still being forwarded, and none is forwarded in kBlackhole.
#ifndef TIERKV_TESTS_FAULT_PROXY_H_
#define TIERKV_TESTS_FAULT_PROXY_H_

#include <atomic>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace tierkv::testing {

class FaultProxy {
 public:
  enum class Mode { kPass, kBlackhole, kReset };

  // Listens on a free loopback port and forwards to `target` ("host:port").
  explicit FaultProxy(std::string target);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  void SetMode(Mode mode);

 private:
  void Accept();
  void Pump(int client_fd);
  void ResetAll();

  const std::string target_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};  // closes to stop every thread
  std::atomic<Mode> mode_{Mode::kPass};
  // Pumps hold it shared from the mode check to the end of a forward, SetMode
  // exclusively: a pump woken just before a blackhole cannot forward after it.
  std::shared_mutex forward_mu_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<int> fds_;  // open connection sockets (both sides)
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_FAULT_PROXY_H_
