#include "cluster/drain.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <set>
#include <string_view>

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
};

namespace {

constexpr size_t kBatch = 64;
// ... and at most about kPeerMessageBytes of keys.
// How long the source may take to list what it holds (a stream of pages).
constexpr int64_t kListDeadlineMs = 60000;

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

}  // namespace

std::string DrainSummary(const DrainJobView& v) {
  return "job_id=" + v.id + " state=" + v.state + " source=" + v.source +
         " segment=" + (v.segment.empty() ? "-" : v.segment) +
         " objects_total=" + std::to_string(v.total) + " objects_moved=" + std::to_string(v.moved) +
         " objects_failed=" + std::to_string(v.failed) + " bytes_moved=" + std::to_string(v.bytes) +
         " started_ms=" + std::to_string(v.started_unix_ms) +
         " finished_ms=" + std::to_string(v.finished_unix_ms);
}

DrainJobs::DrainJobs(const HaStateProvider* membership, std::string self,
                     std::shared_ptr<const PeerCredentials> credentials, JobNumbers numbers)
    : membership_(membership),
      self_(std::move(self)),
      credentials_(std::move(credentials)),
      numbers_(std::move(numbers)) {}

DrainJobs::~DrainJobs() { Stop(); }

void DrainJobs::Stop() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    if (running_) running_->cancel = true;
    t = std::move(runner_);
  }
  if (t.joinable()) t.join();
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
  if (runner_.joinable()) runner_.join();  // the previous job's thread has ended
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
  running_ = job;
  runner_ = std::thread([this, job] { Run(job); });
  return job->view.id;
}

Result<DrainJobView> DrainJobs::Query(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no drain job '" + id + "'");
  return it->second->view;
}

Status DrainJobs::Cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no drain job '" + id + "'");
  it->second->cancel = true;
  return Status::Ok();
}

void DrainJobs::Run(const std::shared_ptr<Job>& job) {
  auto finish = [&](const std::string& state, const std::string& error) {
    std::lock_guard lock(mu_);
    job->view.state = state;
    job->view.error = error;
    job->view.finished_unix_ms = NowMs();
    running_.reset();
    if (!error.empty()) spdlog::warn("drain job {} {}: {}", job->view.id, state, error);
  };
  const ClusterView cv = membership_->Members();
  std::unique_ptr<peer::Peer::Stub> source;
  std::vector<std::unique_ptr<peer::Peer::Stub>> targets;
  for (const MemberView& m : cv.members) {
    auto stub = peer::Peer::NewStub(PeerChannel(m.endpoint, credentials_.get()));
    if (m.node_id == job->view.source) {
      source = std::move(stub);
    } else {
      targets.push_back(std::move(stub));
    }
  }
  if (!source || targets.empty()) return finish("failed", "the source or every target left");
  // The listing comes as a stream of pages; each object is kept once (a
  // whole node lists an object in DRAM and on SSD twice).
  std::vector<peer::DrainListResponse> pages;
  std::map<std::string, std::vector<const peer::InventoryRecord*>> by_tenant;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(PeerDeadline(kListDeadlineMs));
    peer::DrainListRequest req;
    req.set_medium(job->medium);
    std::unique_ptr<grpc::ClientReader<peer::DrainListResponse>> reader =
        source->DrainList(&ctx, req);
    for (peer::DrainListResponse page; reader->Read(&page);) pages.push_back(std::move(page));
    const grpc::Status gs = reader->Finish();
    if (!gs.ok()) return finish("failed", "listing the source: " + gs.error_message());
    std::set<std::pair<std::string_view, std::string_view>> seen;
    for (const peer::DrainListResponse& page : pages) {
      for (const peer::InventoryRecord& r : page.records()) {
        if (seen.emplace(r.tenant(), r.key()).second) by_tenant[r.tenant()].push_back(&r);
      }
    }
    std::lock_guard lock(mu_);
    job->view.total = seen.size();
  }
  // Batches of one tenant, sent to the targets in turn. Why the first object
  // that was not moved stayed, for the log.
  size_t turn = 0;
  std::string first_failure;
  auto failed = [&](const std::string& key, const std::string& why) {
    if (first_failure.empty()) first_failure = "'" + key.substr(0, 128) + "': " + why;
  };
  for (const auto& [tenant, recs] : by_tenant) {
    for (size_t at = 0, end = 0; at < recs.size(); at = end) {
      if (job->cancel) return finish("cancelled", "");
      size_t key_bytes = 0;
      do {
        key_bytes += recs[end++]->key().size();
      } while (end < recs.size() && end - at < kBatch && key_bytes < kPeerMessageBytes);
      peer::PullRequest pull;
      pull.set_tenant(tenant);
      pull.set_source(job->view.source);
      for (size_t i = at; i < end; ++i) {
        pull.add_keys(recs[i]->key());
        pull.add_generations(recs[i]->generation());
      }
      peer::ItemResults pulled;
      grpc::ClientContext pctx;
      pctx.set_deadline(PeerDeadline(120000));
      const grpc::Status ps = targets[turn++ % targets.size()]->Pull(&pctx, pull, &pulled);
      peer::DropRequest drop;
      drop.set_tenant(tenant);
      if (ps.ok()) *drop.mutable_fence() = pulled.fence();
      std::vector<const peer::InventoryRecord*> dropping;
      for (size_t i = at; i < end; ++i) {
        if (!ps.ok()) {
          failed(recs[i]->key(), "pull: " + ps.error_message());
          continue;
        }
        if (static_cast<size_t>(pulled.items_size()) != end - at) {
          failed(recs[i]->key(), "pull: a malformed answer");
          continue;
        }
        if (const peer::GrantedItem& r = pulled.items(static_cast<int>(i - at)); r.code() != 0) {
          failed(recs[i]->key(), "pull: " + r.message());
          continue;
        }
        peer::GrantItem* g = drop.add_items();
        g->set_tenant(tenant);
        g->set_key(recs[i]->key());
        g->set_generation(recs[i]->generation());
        dropping.push_back(recs[i]);
      }
      uint64_t moved = 0, bytes = 0;
      if (!dropping.empty()) {
        peer::ItemResults dropped;
        grpc::ClientContext dctx;
        dctx.set_deadline(PeerDeadline(30000));
        const grpc::Status ds = source->Drop(&dctx, drop, &dropped);
        if (!ds.ok()) failed(dropping[0]->key(), "drop: " + ds.error_message());
        for (size_t j = 0;
             ds.ok() && j < dropping.size() && j < static_cast<size_t>(dropped.items_size()); ++j) {
          if (const peer::GrantedItem& r = dropped.items(static_cast<int>(j)); r.code() != 0) {
            failed(dropping[j]->key(), "drop: " + r.message());
            continue;
          }
          ++moved;
          bytes += dropping[j]->size();
        }
      }
      std::lock_guard lock(mu_);
      job->view.moved += moved;
      job->view.bytes += bytes;
      job->view.failed += (end - at) - moved;
    }
  }
  if (!first_failure.empty()) {
    std::lock_guard lock(mu_);
    spdlog::warn("drain job {}: {} of {} objects not moved (they stay on {}); the first: {}",
                 job->view.id, job->view.failed, job->view.total, job->view.source, first_failure);
  }
  finish("done", "");
}

}  // namespace tierkv
