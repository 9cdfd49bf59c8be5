#include "cluster/grant_releaser.h"

namespace tierkv {

GrantReleaser::GrantReleaser(Send send, std::chrono::milliseconds linger)
    : send_(std::move(send)), linger_(linger), thread_([this] { Loop(); }) {}

GrantReleaser::~GrantReleaser() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // sends what is queued
}

bool GrantReleaser::Queue(PendingRelease r) {
  std::lock_guard lock(mu_);
  if (stop_) return false;
  r.queued = std::chrono::steady_clock::now();
  queue_.push_back(std::move(r));
  // Fetches one after another each queue a release: only an idle thread is
  // woken, not one already sleeping until an earlier release is due.
  if (idle_) cv_.notify_one();
  return true;
}

std::vector<PendingRelease> GrantReleaser::TakeFor(const FetchPeer& peer, size_t most) {
  std::vector<PendingRelease> out;
  std::lock_guard lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end() && out.size() < most;) {
    if (it->peer.get() == &peer) {
      out.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void GrantReleaser::Return(std::vector<PendingRelease> releases) {
  if (releases.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (auto it = releases.rbegin(); it != releases.rend(); ++it) {
      queue_.push_front(std::move(*it));
    }
  }
  cv_.notify_one();
}

size_t GrantReleaser::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void GrantReleaser::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    idle_ = true;
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    idle_ = false;
    if (queue_.empty()) return;  // stopping, and nothing left
    if (!stop_) {
      const auto due = queue_.front().queued + linger_;
      cv_.wait_until(lock, due, [this] { return stop_ || queue_.empty(); });
      if (queue_.empty() ||
          (!stop_ && std::chrono::steady_clock::now() < queue_.front().queued + linger_)) {
        continue;
      }
    }
    PendingRelease r = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    send_(r);
    lock.lock();
  }
}

}  // namespace tierkv
