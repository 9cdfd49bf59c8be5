// LeaseKeeper: keeps one etcd lease alive.
//
// One LeaseKeepAlive stream at a time (with `hasleader` metadata), written by
// the keeper's thread and read by a reader thread of that stream: a keepalive
// request a tenth of the TTL after the last answer (KeepAliveScheduleFor),
// each reply reported with the time its request was sent, so the owner can
// bound its validity by what etcd really acknowledged (sent_at + TTL/2 in
// membership). A reply with TTL 0 means the lease is gone for good: OnLost is
// called once and the keeper stops. A stream that fails (member down,
// blackholed, no leader) is reopened on the next endpoint at the next tick;
// every failed tick is counted.
//
// Callbacks run on the keeper's thread; they must return quickly and must not
// call Stop(). Stop() cancels the stream and joins the thread (it returns within
// one gRPC cancellation, never waiting for etcd).
//
// Thread-safety: Start/Stop from one thread; counters from any.
#ifndef TIERKV_ETCD_LEASE_KEEPER_H_
#define TIERKV_ETCD_LEASE_KEEPER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "etcd/etcd_client.h"

namespace tierkv::etcd {

// When the keeper writes: the next request `tick` after the last answer, and a
// request left unanswered for `reply_timeout` fails the stream. A registration
// is valid for TTL/2 after an acknowledged request was sent, so renewing every
// TTL/10 leaves about 2/5 of the TTL (4 s of a 10 s TTL) to ride out an etcd
// outage before the registration is fenced; renewing every TTL/3, as plain
// lease holders do, would leave only TTL/6.
struct KeepAliveSchedule {
  std::chrono::milliseconds tick;
  std::chrono::milliseconds reply_timeout;
};
KeepAliveSchedule KeepAliveScheduleFor(int64_t ttl_secs);

struct LeaseCallbacks {
  // etcd acknowledged the lease with `ttl_secs` left, for a request sent at
  // `sent_at_nanos` (Clock::NowNanos).
  std::function<void(int64_t sent_at_nanos, int64_t ttl_secs)> renewed;
  std::function<void()> lost;  // TTL 0: the lease no longer exists
};

class LeaseKeeper {
 public:
  LeaseKeeper(Client* client, const Clock* clock) : client_(client), clock_(clock) {}
  ~LeaseKeeper() { Stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void Start(int64_t lease_id, int64_t ttl_secs, LeaseCallbacks callbacks);
  void Stop();

  uint64_t renew_failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  void Run();
  // One stream's life; returns false when the keeper is done (stopped, or the
  // lease is lost), true when the stream failed and another should be opened.
  bool Stream();

  Client* const client_;
  const Clock* const clock_;
  int64_t lease_id_ = 0;
  int64_t ttl_secs_ = 0;
  LeaseCallbacks callbacks_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool lost_ = false;
  void* context_ = nullptr;  // the open stream's grpc::ClientContext (mu_)
  std::atomic<uint64_t> failures_{0};
};

}  // namespace tierkv::etcd

#endif  // TIERKV_ETCD_LEASE_KEEPER_H_
