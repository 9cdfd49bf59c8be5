#include "etcd/lease_keeper.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "etcd/channel.h"

namespace tierkv::etcd {

KeepAliveSchedule KeepAliveScheduleFor(int64_t ttl_secs) {
  const int64_t ttl_ms = std::max<int64_t>(ttl_secs, 1) * 1000;
  return {std::chrono::milliseconds(ttl_ms / 10),
          std::chrono::milliseconds(std::min<int64_t>(ttl_ms / 8 + 1, 3000))};
}

void LeaseKeeper::Start(int64_t lease_id, int64_t ttl_secs, LeaseCallbacks callbacks) {
  lease_id_ = lease_id;
  ttl_secs_ = std::max<int64_t>(ttl_secs, 1);
  callbacks_ = std::move(callbacks);
  stop_ = false;
  lost_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (context_ != nullptr) static_cast<grpc::ClientContext*>(context_)->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::Run() {
  while (Stream()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    // A short pause before the next endpoint, so dead endpoints are not spun on.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
  }
}

bool LeaseKeeper::Stream() {
  const auto [tick, reply_timeout] = KeepAliveScheduleFor(ttl_secs_);
  std::shared_ptr<Client::Channel> ch = client_->CurrentChannel();
  grpc::ClientContext ctx;
  if (!AttachStream(mu_, stop_, *client_, context_, &ctx)) return false;
  auto stream = ch->lease->LeaseKeepAlive(&ctx);
  bool outstanding = false;
  bool reader_done = false;
  int64_t sent_at = 0;
  std::thread reader([&] {
    etcdserverpb::LeaseKeepAliveResponse resp;
    while (stream->Read(&resp)) {
      std::unique_lock<std::mutex> lock(mu_);
      if (resp.ttl() <= 0) {
        lost_ = true;
        break;
      }
      const int64_t at = sent_at;
      outstanding = false;
      lock.unlock();
      callbacks_.renewed(at, resp.ttl());
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    reader_done = true;
    cv_.notify_all();
  });
  bool failed = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !lost_ && !reader_done) {
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease_id_);
    sent_at = clock_->NowNanos();
    outstanding = true;
    lock.unlock();
    const bool wrote = stream->Write(req);
    lock.lock();
    if (!wrote) {
      failed = true;
      break;
    }
    if (!cv_.wait_for(lock, reply_timeout,
                      [&] { return stop_ || lost_ || reader_done || !outstanding; }) ||
        (outstanding && !stop_ && !lost_)) {
      failed = true;  // unanswered (blackholed) or the stream ended
      break;
    }
    cv_.wait_for(lock, tick, [&] { return stop_ || lost_ || reader_done; });
  }
  ctx.TryCancel();
  context_ = nullptr;
  const bool done = stop_ || lost_;
  lock.unlock();
  reader.join();
  (void)stream->Finish();
  if (lost_ && !stop_) {
    spdlog::warn("etcd lease {:x} is gone (keepalive answered TTL 0)", lease_id_);
    if (callbacks_.lost) callbacks_.lost();
  }
  if (done) return false;
  if (failed || reader_done) client_->ReportFailure(*ch);
  return true;
}

}  // namespace tierkv::etcd
