// GrantReleaser: releases of the grants a remote fetch used, off the fetch's
// path (docs/cluster.md, "Remote reads"). A release waits up to `linger` for
// the next authorization to the same owner to carry it (TakeFor: one call
// fewer per fetch); then a thread of its own hands it to `send`, alone. An
// idle releaser sleeps until a release is queued: it never polls.
//
// Thread-safety: every method from any thread. The destructor sends what is
// still queued (each send bounded by the caller's release deadline).
#ifndef TIERKV_CLUSTER_GRANT_RELEASER_H_
#define TIERKV_CLUSTER_GRANT_RELEASER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tierkv {

// An owner as the fetcher knows it (one per live member but this one).
struct FetchPeer {
  std::string node, uuid, endpoint, data_endpoint;
  std::atomic<uint64_t> inflight_bytes{0};
  size_t slots = 0;  // grants awaiting release (the fetcher's slots lock)
};

struct PendingRelease {
  std::shared_ptr<FetchPeer> peer;
  uint64_t ticket = 0;
  bool slot = false;  // the grant holds one of the fetcher's slots until released
  std::chrono::steady_clock::time_point queued;
};

class GrantReleaser {
 public:
  // `send` releases one grant alone (and frees its slot); called on the
  // releaser's thread, or in the destructor.
  using Send = std::function<void(const PendingRelease&)>;
  GrantReleaser(Send send, std::chrono::milliseconds linger);
  ~GrantReleaser();
  GrantReleaser(const GrantReleaser&) = delete;
  GrantReleaser& operator=(const GrantReleaser&) = delete;

  // Queues `r` (its `queued` is set here). False while the releaser is
  // being destroyed: the caller sends it itself.
  bool Queue(PendingRelease r);
  // Up to `most` releases queued for `peer`, taken off the queue: they travel
  // with an authorization to it.
  std::vector<PendingRelease> TakeFor(const FetchPeer& peer, size_t most);
  // Releases an authorization took but could not deliver (the owner did not
  // answer): queued again in front, and sent alone once due.
  void Return(std::vector<PendingRelease> releases);
  // Releases queued now.
  size_t queued() const;

 private:
  void Loop();

  const Send send_;
  const std::chrono::milliseconds linger_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingRelease> queue_;
  bool stop_ = false;
  // The thread waits with no deadline (the queue was empty): a queued release
  // must wake it. Otherwise it wakes by itself when the oldest one is due.
  bool idle_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_GRANT_RELEASER_H_
