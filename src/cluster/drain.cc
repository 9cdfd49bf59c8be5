#include "cluster/drain.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/peer_limits.h"
#include "cluster/peer_rpc.h"
#include "common/clock.h"
#include "peer.grpc.pb.h"
#include "tierkv/types.h"

namespace tierkv {

struct DrainJobs::Job {
  DrainJobView view;  // mu_
  std::atomic<bool> cancel{false};
  uint32_t medium = 255;
  grpc::ClientContext* listing = nullptr;  // mu_; the open listing, for Cancel and Stop
  // Asks the job to stop; cancels its listing so that a wait for the next
  // page ends too. mu_ held.
  void Stop() {
    cancel = true;
    if (listing != nullptr) listing->TryCancel();
  }
};

namespace {

constexpr size_t kBatch = 64;
// ... and at most about kPeerMessageBytes of keys.
// The listing stays open while the job moves what it has listed so far; a
// job of a node that lists longer than this fails (Cancel ends it at once).
constexpr int64_t kListDeadlineMs = 24ll * 3600 * 1000;

int64_t NowMs() { return RealClock()->NowUnixMillis(); }

// "rank-<R>-dram" or "rank-<R>-ssd", R decimal digits only (no sign, no
// spaces) that fit 32 bits.
bool ParseSegment(std::string_view segment, uint32_t* rank, uint32_t* medium) {
  constexpr std::string_view kPrefix = "rank-";
  if (!segment.starts_with(kPrefix)) return false;
  const size_t dash = segment.rfind('-');
  const std::string_view kind = segment.substr(dash + 1);
  const std::string_view digits = segment.substr(kPrefix.size(), dash - kPrefix.size());
  if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits.front()))) return false;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *rank);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  if (kind == "dram") {
    *medium = static_cast<uint32_t>(Medium::kDram);
  } else if (kind == "ssd") {
    *medium = static_cast<uint32_t>(Medium::kSsd);
  } else {
    return false;
  }
  return true;
}

// Has `target` copy one batch of `tenant`'s objects listed by the source
// (Peer/Pull names the source, node `source_id` of runtime `source_uuid`,
// and each listed generation), then the source drop what reached it
// (Peer/Drop with the target's fence). `not_pulled` gets each object the
// target did not copy, with why (another target may); `failed` hears of each
// object copied but not dropped, with why. Returns the objects and bytes moved, and the
// objects gone: removed or replaced on the source since they were listed,
// so no longer its to move.
struct Moved {
  uint64_t objects = 0, bytes = 0, gone = 0;
};
using NotPulled = std::vector<std::pair<const peer::InventoryRecord*, std::string>>;
Moved MoveBatch(const peer::PeerCaller& caller, const std::string& source_id,
                const std::string& source_uuid, const std::string& tenant,
                std::span<const peer::InventoryRecord* const> batch, peer::Peer::Stub& source,
                peer::Peer::Stub& target, NotPulled* not_pulled,
                const std::function<void(const std::string&, const std::string&)>& failed) {
  peer::PullRequest pull;
  *pull.mutable_caller() = caller;
  pull.set_tenant(tenant);
  pull.set_source(source_id);
  pull.set_source_uuid(source_uuid);
  uint64_t listed_sequence = 0;
  for (const peer::InventoryRecord* r : batch) {
    pull.add_keys(r->key());
    pull.add_generations(r->generation());
    listed_sequence = std::max(listed_sequence, r->sequence());
  }
  pull.set_listed_sequence(listed_sequence);
  peer::ItemResults pulled;
  grpc::ClientContext pctx;
  pctx.set_deadline(PeerDeadline(120000));
  const grpc::Status ps = target.Pull(&pctx, pull, &pulled);
  peer::DropRequest drop;
  *drop.mutable_caller() = caller;
  drop.set_tenant(tenant);
  if (ps.ok()) *drop.mutable_fence() = pulled.fence();
  std::vector<const peer::InventoryRecord*> dropping;
  Moved out;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!ps.ok()) {
      not_pulled->emplace_back(batch[i], ps.error_message());
      continue;
    }
    if (static_cast<size_t>(pulled.items_size()) != batch.size()) {
      not_pulled->emplace_back(batch[i], "a malformed answer");
      continue;
    }
    if (const peer::GrantedItem& r = pulled.items(static_cast<int>(i)); r.code() != 0) {
      if (r.gone()) {
        ++out.gone;
      } else {
        not_pulled->emplace_back(batch[i], r.message());
      }
      continue;
    }
    peer::GrantItem* g = drop.add_items();
    g->set_tenant(tenant);
    g->set_key(batch[i]->key());
    g->set_generation(batch[i]->generation());
    dropping.push_back(batch[i]);
  }
  if (dropping.empty()) return out;
  peer::ItemResults dropped;
  grpc::ClientContext dctx;
  dctx.set_deadline(PeerDeadline(30000));
  const grpc::Status ds = source.Drop(&dctx, drop, &dropped);
  for (size_t j = 0; j < dropping.size(); ++j) {
    // Every item not removed is a failure with its reason, as in the Pull.
    if (!ds.ok()) {
      failed(dropping[j]->key(), "drop: " + ds.error_message());
      continue;
    }
    if (j >= static_cast<size_t>(dropped.items_size())) {
      failed(dropping[j]->key(), "drop: a malformed answer");
      continue;
    }
    if (const peer::GrantedItem& r = dropped.items(static_cast<int>(j)); r.code() != 0) {
      if (r.gone()) {
        ++out.gone;  // the copy stays on the target, as any fetched copy
      } else {
        failed(dropping[j]->key(), "drop: " + r.message());
      }
      continue;
    }
    ++out.objects;
    out.bytes += dropping[j]->size();
  }
  return out;
}

}  // namespace

DrainJobs::DrainJobs(const HaStateProvider* membership, std::string self,
                     std::shared_ptr<const PeerCredentials> credentials, JobNumbers numbers,
                     Scheduler* scheduler)
    : membership_(membership),
      self_(std::move(self)),
      credentials_(std::move(credentials)),
      numbers_(std::move(numbers)),
      runner_((scheduler ? scheduler : ThreadScheduler())->Queue({})) {}

DrainJobs::~DrainJobs() { Stop(); }

void DrainJobs::Stop() {
  {
    std::lock_guard lock(mu_);
    if (running_) running_->Stop();
  }
  runner_->Stop();  // waits for the job (which takes mu_ to finish)
}

Result<std::string> DrainJobs::Start(const std::string& segment, const std::string& node) {
  // The request's shape first, so a malformed one gets the same answer on every manager.
  if (segment.empty() && node.empty()) {
    return InvalidArgument(
        "give the segment to drain (\"segment\":\"rank-<rank>-dram\" or \"rank-<rank>-ssd\") "
        "or the node (\"node\":\"<node id>\")");
  }
  if (!segment.empty() && !node.empty()) {
    return InvalidArgument("give the segment to drain or the node, not both");
  }
  auto job = std::make_shared<Job>();
  uint32_t rank = 0;
  if (!segment.empty() && !ParseSegment(segment, &rank, &job->medium)) {
    return InvalidArgument("segment must be rank-<rank>-dram or rank-<rank>-ssd, got '" + segment +
                           "'");
  }
  const HaState ha = membership_->Get();
  if (ha.role != "leader") {
    // Name the coordinator so that the request can be sent there: its node
    // id and REST URL when it is a live member (the election names its peer
    // address).
    std::string coordinator = ha.leader_address;
    for (const MemberView& m : membership_->Members().members) {
      if (m.endpoint == ha.leader_address && !m.rest_url.empty()) {
        coordinator = "node " + m.node_id + ", " + m.rest_url;
      }
    }
    return Status(Code::kUnavailable,
                  "drain jobs run on the coordinator; this manager is not it (coordinator: " +
                      coordinator + ")");
  }
  const ClusterView cv = membership_->Members();
  std::string source = node;
  if (!segment.empty()) {
    for (const MemberView& m : cv.members) {
      if (m.rank == rank) source = m.node_id;
    }
    if (source.empty()) return InvalidArgument("no live member has rank " + std::to_string(rank));
  }
  bool known = false;
  size_t others = 0;
  for (const MemberView& m : cv.members) {
    known |= m.node_id == source;
    others += m.node_id != source ? 1 : 0;
  }
  if (!known) return InvalidArgument("no live member is node '" + source + "'");
  if (others == 0) return InvalidArgument("no other live manager to drain " + source + " to");
  {
    std::lock_guard lock(mu_);
    if (running_) return Status(Code::kRetry, "drain job " + running_->view.id + " is running");
  }
  uint64_t number = 0;
  if (numbers_) {
    Result<uint64_t> n = numbers_();  // etcd: not under the lock
    if (!n.ok()) {
      return Status(Code::kUnavailable, "no job number could be had: " + n.status().ToString());
    }
    number = *n;
  }
  std::lock_guard lock(mu_);
  if (running_) return Status(Code::kRetry, "drain job " + running_->view.id + " is running");
  job->view.id = "job_" + std::to_string(numbers_ ? number : next_id_++);
  job->view.state = "running";
  job->view.source = source;
  job->view.segment = segment;
  job->view.started_unix_ms = NowMs();
  jobs_[job->view.id] = job;
  order_.push_back(job->view.id);
  while (order_.size() > 64) {
    jobs_.erase(order_.front());
    order_.pop_front();
  }
  if (!runner_->Post([this, job] { Run(job); })) {
    job->view.state = "failed";
    job->view.error = "this manager is shutting down";
    return Status(Code::kUnavailable, job->view.error);
  }
  running_ = job;
  return job->view.id;
}

Result<DrainJobView> DrainJobs::Query(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no drain job '" + id + "'");
  return it->second->view;
}

DrainStats DrainJobs::Stats() const {
  std::lock_guard lock(mu_);
  DrainStats s = stats_;
  s.running = running_ != nullptr;
  return s;
}

Status DrainJobs::Cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no drain job '" + id + "'");
  it->second->Stop();
  return Status::Ok();
}

void DrainJobs::Run(const std::shared_ptr<Job>& job) {
  auto finish = [&](const std::string& state, const std::string& error) {
    std::lock_guard lock(mu_);
    job->view.state = state;
    job->view.error = error;
    job->view.finished_unix_ms = NowMs();
    running_.reset();
    ++(state == "done"        ? stats_.jobs_done
       : state == "cancelled" ? stats_.jobs_cancelled
                              : stats_.jobs_failed);
    if (!error.empty()) spdlog::warn("drain job {} {}: {}", job->view.id, state, error);
  };
  const ClusterView cv = membership_->Members();
  peer::PeerCaller caller;  // every drain request names this coordinator
  caller.set_node_id(cv.node_id);
  caller.set_runtime_uuid(cv.runtime_uuid);
  std::unique_ptr<peer::Peer::Stub> source;
  std::string source_uuid;
  std::vector<std::unique_ptr<peer::Peer::Stub>> targets;
  for (const MemberView& m : cv.members) {
    auto stub = peer::Peer::NewStub(PeerChannel(m.endpoint, credentials_.get()));
    if (m.node_id == job->view.source) {
      source = std::move(stub);
      source_uuid = m.runtime_uuid;
    } else {
      targets.push_back(std::move(stub));
    }
  }
  if (!source || targets.empty()) return finish("failed", "the source or every target left");
  // Why objects were not moved, for the log: each distinct reason (at most
  // 8) with its count and the first key it came with.
  std::map<std::string, std::pair<uint64_t, std::string>> reasons;
  auto failed = [&](const std::string& key, const std::string& why) {
    auto it = reasons.find(why);
    if (it == reasons.end() && reasons.size() < 8) {
      it = reasons.emplace(why, std::make_pair(0, key.substr(0, 128))).first;
    }
    if (it != reasons.end()) ++it->second.first;
  };
  // The listing is read a page at a time, and each page's objects are moved
  // before the next page is read, so the coordinator holds one page (at most
  // 1024 records), whatever the source holds. A whole node lists an object
  // in DRAM and on SSD as two records one after the other: the second is
  // skipped, also across pages.
  grpc::ClientContext ctx;
  ctx.set_deadline(PeerDeadline(kListDeadlineMs));
  {
    std::lock_guard lock(mu_);
    job->listing = &ctx;
    if (job->cancel) ctx.TryCancel();
  }
  struct Unlist {
    DrainJobs* jobs;
    Job* job;
    ~Unlist() {
      std::lock_guard lock(jobs->mu_);
      job->listing = nullptr;
    }
  } unlist{this, job.get()};
  peer::DrainListRequest req;
  req.set_medium(job->medium);
  *req.mutable_caller() = caller;
  std::unique_ptr<grpc::ClientReader<peer::DrainListResponse>> reader =
      source->DrainList(&ctx, req);
  std::string last_tenant, last_key;
  size_t turn = 0;  // batches go to the targets in turn
  for (peer::DrainListResponse page; !job->cancel && reader->Read(&page);) {
    std::map<std::string_view, std::vector<const peer::InventoryRecord*>> by_tenant;
    uint64_t listed = 0;
    for (const peer::InventoryRecord& r : page.records()) {
      if (r.key() == last_key && r.tenant() == last_tenant) continue;
      last_tenant = r.tenant();
      last_key = r.key();
      by_tenant[r.tenant()].push_back(&r);
      ++listed;
    }
    {
      std::lock_guard lock(mu_);
      job->view.total += listed;
    }
    for (const auto& [tenant, recs] : by_tenant) {
      for (size_t at = 0, end = 0; at < recs.size() && !job->cancel; at = end) {
        size_t key_bytes = 0;
        do {
          key_bytes += recs[end++]->key().size();
        } while (end < recs.size() && end - at < kBatch && key_bytes < kPeerMessageBytes);
        // What one target does not copy (out of its scope, another value of
        // the key there, no room, the target gone) is asked of the next, once
        // of each target.
        std::vector<const peer::InventoryRecord*> todo(recs.begin() + at, recs.begin() + end);
        NotPulled not_pulled;
        Moved m;
        for (size_t tried = 0; !todo.empty() && tried < targets.size(); ++tried) {
          not_pulled.clear();
          const Moved one =
              MoveBatch(caller, job->view.source, source_uuid, std::string(tenant), todo, *source,
                        *targets[turn++ % targets.size()], &not_pulled, failed);
          m.objects += one.objects;
          m.bytes += one.bytes;
          m.gone += one.gone;
          todo.clear();
          for (const auto& [r, why] : not_pulled) todo.push_back(r);
        }
        for (const auto& [r, why] : not_pulled) failed(r->key(), "pull: " + why);
        std::lock_guard lock(mu_);
        const uint64_t stayed = (end - at) - m.objects - m.gone;
        job->view.total -= m.gone;  // listed, but no longer the source's to move
        job->view.moved += m.objects;
        job->view.bytes += m.bytes;
        job->view.failed += stayed;
        stats_.objects_moved += m.objects;
        stats_.objects_failed += stayed;
        stats_.objects_gone += m.gone;
        stats_.bytes_moved += m.bytes;
      }
    }
  }
  if (job->cancel) {
    ctx.TryCancel();
    (void)reader->Finish();
    return finish("cancelled", "");
  }
  if (const grpc::Status gs = reader->Finish(); !gs.ok()) {
    return finish("failed", "listing the source: " + gs.error_message());
  }
  if (!reasons.empty()) {
    std::string why;
    for (const auto& [reason, seen] : reasons) {
      why += "; " + std::to_string(seen.first) + " (the first '" + seen.second + "'): " + reason;
    }
    std::lock_guard lock(mu_);
    spdlog::warn("drain job {}: {} of {} objects not moved (they stay on {}){}", job->view.id,
                 job->view.failed, job->view.total, job->view.source, why);
  }
  finish("done", "");
}

}  // namespace tierkv
