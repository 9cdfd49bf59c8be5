#include "etcd/watcher.h"

#include <spdlog/spdlog.h>

#include "etcd/channel.h"

namespace tierkv::etcd {

void Watcher::Start(WatchCallbacks callbacks) {
  callbacks_ = std::move(callbacks);
  stop_ = false;
  (void)Reset();  // the first view before Start returns, when etcd answers
  watch_thread_ = std::thread([this] { RunWatch(); });
  if (resync_ms_ > 0) {
    resync_ = scheduler_->Every(std::chrono::milliseconds(resync_ms_), [this] {
      if (Reset()) resyncs_.fetch_add(1, std::memory_order_relaxed);
    });
  }
}

void Watcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (context_ != nullptr) static_cast<grpc::ClientContext*>(context_)->TryCancel();
  }
  cv_.notify_all();
  resync_.reset();  // waits for a resync in progress
  if (watch_thread_.joinable()) watch_thread_.join();
}

bool Watcher::Pause(std::chrono::milliseconds ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, ms, [this] { return stop_; });
}

bool Watcher::Reset() {
  Result<RangeResult> r = client_->Get(prefix_, /*prefix=*/true);
  if (!r.ok()) return false;
  std::lock_guard<std::mutex> lock(apply_mu_);
  // Older than what the watch already delivered: it would roll the view back.
  // At the same revision it is delivered again: it repairs events the watch lost.
  if (r->revision < applied_.load(std::memory_order_relaxed)) return true;
  callbacks_.reset(r->kvs, r->revision);
  applied_.store(r->revision, std::memory_order_release);
  return true;
}

void Watcher::RunWatch() {
  while (applied_.load(std::memory_order_acquire) == 0 && !Reset()) {
    if (!Pause(std::chrono::milliseconds(200))) return;
  }
  while (Watch()) {
    reconnects_.fetch_add(1, std::memory_order_relaxed);
    if (!Pause(std::chrono::milliseconds(200))) return;
  }
}

bool Watcher::Watch() {
  std::shared_ptr<Client::Channel> ch = client_->CurrentChannel();
  grpc::ClientContext ctx;
  if (!AttachStream(mu_, stop_, *client_, context_, &ctx)) return false;
  auto stream = ch->watch->Watch(&ctx);
  etcdserverpb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(prefix_);
  create->set_range_end(PrefixEnd(prefix_));
  create->set_start_revision(applied_.load(std::memory_order_acquire) + 1);
  create->set_progress_notify(true);
  bool compacted = false;
  if (stream->Write(req)) {
    etcdserverpb::WatchResponse resp;
    while (stream->Read(&resp)) {
      if (resp.created()) connected_.store(true, std::memory_order_release);
      if (resp.compact_revision() > 0) {
        compacted = true;  // the history from our revision is gone
        break;
      }
      if (resp.canceled()) break;
      std::vector<WatchEvent> events;
      std::lock_guard<std::mutex> lock(apply_mu_);
      const int64_t applied = applied_.load(std::memory_order_relaxed);
      int64_t newest = applied;
      for (const auto& e : resp.events()) {
        if (e.kv().mod_revision() <= applied) continue;  // already in a reset
        events.push_back({e.type() == mvccpb::Event::PUT, FromProto(e.kv())});
        newest = std::max(newest, e.kv().mod_revision());
      }
      // An empty answer other than the creation is a progress notification:
      // everything up to its revision has been delivered. (The creation's
      // header revision may be ahead of events still to come.)
      if (resp.events_size() == 0 && !resp.created()) {
        newest = std::max(newest, resp.header().revision());
      }
      if (!events.empty()) callbacks_.events(events, newest);
      applied_.store(newest, std::memory_order_release);
    }
  }
  connected_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = nullptr;
  }
  ctx.TryCancel();
  (void)stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
  }
  if (compacted) {
    compactions_.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("etcd watch of {}: history compacted, re-reading the prefix", prefix_);
    while (!Reset()) {
      if (!Pause(std::chrono::milliseconds(200))) return false;
    }
  } else {
    client_->ReportFailure(*ch);
  }
  return true;
}

}  // namespace tierkv::etcd
