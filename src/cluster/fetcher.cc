#include "cluster/fetcher.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "cluster/fetch_route.h"
#include "cluster/fetcher_internal.h"
#include "cluster/peer_rpc.h"
#include "common/tracer.h"
#include "peer.grpc.pb.h"

namespace tierkv {

using fetcher_internal::Trace;

namespace {

// Rounds of routing again for keys refused as stale (an owner that replaces a
// value faster than a round takes can make each round stale again).
constexpr int kStaleRounds = 3;

// A value is read in ranges of at least this many bytes.
constexpr uint64_t kMinRange = 4ull << 20;

// How many ranges a value of `size` bytes is read in, `most` at most.
size_t RangesFor(uint64_t size, size_t most) {
  return static_cast<size_t>(std::clamp<uint64_t>(size / kMinRange, 1, std::max<size_t>(most, 1)));
}

GrantAnswer AnswerOf(const peer::GrantedItem& g) {
  GrantAnswer ans;
  ans.status = ItemStatus(g);
  ans.size = g.size();
  ans.generation = g.generation();
  return ans;
}

uint64_t NewTicket() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t t = 0;
  while (t == 0) t = rng();
  return t;
}

}  // namespace

RemoteFetcher::RemoteFetcher(FetcherOptions options, Store* store, const GlobalIndex* index,
                             transfer::DataTransport* transport, CopyTracker* copies)
    : options_(std::move(options)),
      store_(store),
      index_(index),
      transport_(transport),
      copies_(copies) {
  releaser_ = std::thread([this] { ReleaserLoop(); });
}

RemoteFetcher::~RemoteFetcher() {
  {
    std::lock_guard lock(release_mu_);
    release_stop_ = true;
  }
  release_cv_.notify_all();
  releaser_.join();  // sends what is queued (each bounded by the release deadline)
}

void RemoteFetcher::SetMembers(const std::vector<MemberView>& members) {
  std::vector<std::string> gone;
  std::lock_guard lock(peers_mu_);
  std::map<std::string, std::shared_ptr<Peer>> next;
  for (const MemberView& m : members) {
    if (m.node_id == options_.node_id) continue;
    auto it = peers_.find(m.node_id);
    if (it != peers_.end() && it->second->uuid == m.runtime_uuid &&
        it->second->endpoint == m.endpoint && it->second->data_endpoint == m.data_endpoint) {
      next.emplace(m.node_id, it->second);
      continue;
    }
    auto p = std::make_shared<Peer>();
    p->node = m.node_id;
    p->uuid = m.runtime_uuid;
    p->endpoint = m.endpoint;
    p->data_endpoint = m.data_endpoint;
    p->stub = peer::Peer::NewStub(PeerChannel(m.endpoint, options_.credentials.get()));
    next.emplace(m.node_id, std::move(p));
  }
  for (const auto& [node, p] : peers_) {
    auto it = next.find(node);
    if (it == next.end() || it->second->data_endpoint != p->data_endpoint) {
      gone.push_back(p->data_endpoint);
    }
  }
  peers_.swap(next);
  for (const std::string& ep : gone) transport_->Forget(ep);
}

std::shared_ptr<RemoteFetcher::Peer> RemoteFetcher::PeerOf(const std::string& node) const {
  std::lock_guard lock(peers_mu_);
  auto it = peers_.find(node);
  return it == peers_.end() ? nullptr : it->second;
}

std::vector<Status> RemoteFetcher::Fetch(std::string_view tenant,
                                         std::span<const std::string_view> keys,
                                         std::vector<uint64_t>* superseded) {
  TraceScope trace(Trace().fetch);
  fetches_.fetch_add(keys.size(), std::memory_order_relaxed);
  std::vector<Item> items(keys.size());
  std::vector<std::string> composites(keys.size());
  std::vector<SingleFlight<std::string, Status>::Joined> flights(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].tenant = tenant;
    items[i].key = keys[i];
    items[i].keep_superseded = superseded != nullptr;
    composites[i].reserve(tenant.size() + 1 + keys[i].size());
    composites[i].append(tenant).push_back('\0');
    composites[i].append(keys[i]);
    flights[i] = flights_.Join(composites[i]);
  }
  // Route and fetch every key this call leads. A key its owner refused as
  // gone or replaced is asked again, up to kStaleRounds times: of the same
  // owner for whatever value it holds (generation 0), or, when the index names
  // the key on other managers only by now, of one of them.
  std::vector<Item*> todo;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (flights[i].leader) todo.push_back(&items[i]);
  }
  RunPlans(todo);
  std::vector<Item*> round = std::move(todo);
  for (int attempt = 0; attempt < kStaleRounds; ++attempt) {
    std::vector<Item*> again;
    for (Item* it : round) {
      if (!it->stale || !it->only_owner.empty()) continue;
      // The refusing owner is asked for whatever value it holds now (an
      // owner that upserts faster than its stream reaches the index makes
      // every exact generation stale), unless the index names the key on
      // other managers only by now. An owner asked for whatever it holds
      // that refused holds nothing.
      const IndexLookup found = index_->Lookup(tenant, it->key);
      const bool elsewhere =
          !found.locations.empty() &&
          std::none_of(found.locations.begin(), found.locations.end(),
                       [&](const RemoteLocation& l) { return l.owner_uuid == it->loc.owner_uuid; });
      if (!elsewhere && it->any_generation) continue;
      it->any_generation = !elsewhere;
      it->same_owner = !elsewhere;
      it->stale = false;
      it->attempted = false;
      stale_retries_.fetch_add(1, std::memory_order_relaxed);
      again.push_back(it);
    }
    if (again.empty()) break;
    RunPlans(again);
    round = std::move(again);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!flights[i].leader) continue;
    flights_.Forget(composites[i], flights[i].ticket);
    flights[i].ticket->Finish(items[i].status);
  }
  std::vector<Status> out(keys.size());
  if (superseded != nullptr) {
    superseded->assign(keys.size(), 0);
    for (size_t i = 0; i < keys.size(); ++i) (*superseded)[i] = items[i].superseded;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (flights[i].leader) {
      out[i] = std::move(items[i].status);
      continue;
    }
    // Another fetch of this key is under way; its own deadlines bound it.
    shared_flights_.fetch_add(1, std::memory_order_relaxed);
    std::optional<Status> done = flights[i].ticket->WaitFor(std::chrono::seconds(60));
    out[i] = done ? std::move(*done) : NotFound("a concurrent fetch of this key did not end");
  }
  trace.End(std::all_of(out.begin(), out.end(), [](const Status& st) { return st.ok(); }));
  return out;
}

void RemoteFetcher::RunPlans(const std::vector<Item*>& items) {
  std::map<std::string, std::pair<std::shared_ptr<Peer>, std::vector<Item*>>> plans;
  for (Item* item : items) {
    if (item->same_owner) {
      std::shared_ptr<Peer> p = PeerOf(item->loc.owner);
      if (!p || p->uuid != item->loc.owner_uuid || p->data_endpoint.empty()) continue;
      auto& plan = plans[item->loc.owner];
      plan.first = std::move(p);
      plan.second.push_back(item);
      continue;
    }
    const IndexLookup found = index_->Lookup(item->tenant, item->key);
    if (!item->only_owner.empty()) {
      const auto it = std::find_if(
          found.locations.begin(), found.locations.end(), [&](const RemoteLocation& l) {
            return l.owner == item->only_owner && l.generation == item->only_generation;
          });
      std::shared_ptr<Peer> p = it == found.locations.end() ? nullptr : PeerOf(it->owner);
      if (!p || p->uuid != it->owner_uuid || p->data_endpoint.empty()) {
        miss_not_indexed_.fetch_add(1, std::memory_order_relaxed);
        item->not_indexed = it == found.locations.end();  // not a peer-table lag
        item->status = NotFound("the index here does not show " + std::string(item->only_owner) +
                                "'s value at generation " + std::to_string(item->only_generation));
        continue;
      }
      item->loc = *it;
      auto& plan = plans[it->owner];
      plan.first = std::move(p);
      plan.second.push_back(item);
      continue;
    }
    std::vector<RouteCandidate> candidates;
    std::vector<std::shared_ptr<Peer>> candidate_peers;
    for (const RemoteLocation& l : found.locations) {
      std::shared_ptr<Peer> p = PeerOf(l.owner);
      if (!p || p->uuid != l.owner_uuid || p->data_endpoint.empty()) continue;
      candidates.push_back({&l, p->inflight_bytes.load()});
      candidate_peers.push_back(std::move(p));
    }
    const std::optional<size_t> best = PickRoute(candidates);
    if (!best) {
      miss_not_indexed_.fetch_add(1, std::memory_order_relaxed);
      item->status = NoRoute(found);
      continue;
    }
    item->loc = *candidates[*best].location;
    auto& plan = plans[item->loc.owner];
    plan.first = std::move(candidate_peers[*best]);
    plan.second.push_back(item);
  }
  // One plan per owner; owners are served in parallel.
  if (plans.size() == 1) {
    RunPlan(plans.begin()->second.first, plans.begin()->second.second);
  } else if (!plans.empty()) {
    std::vector<std::thread> workers;
    for (auto& [owner, plan] : plans) {
      workers.emplace_back([this, &plan] { RunPlan(plan.first, plan.second); });
    }
    for (std::thread& t : workers) t.join();
  }
}

void RemoteFetcher::RunPlan(const std::shared_ptr<Peer>& owner, std::vector<Item*>& items) {
  Peer& peer = *owner;
  std::vector<SegmentItem> sizes;
  sizes.reserve(items.size());
  for (const Item* it : items) sizes.push_back({it->loc.size, it->key.size() + it->tenant.size()});
  const std::vector<size_t> starts = CutSegments(
      sizes, {options_.segment_items, options_.segment_bytes, options_.segment_key_bytes});
  std::vector<Segment> segs(std::max<size_t>(starts.size(), 1));
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t end = k + 1 < starts.size() ? starts[k + 1] : items.size();
    segs[k].items.assign(items.begin() + starts[k], items.begin() + end);
  }
  std::future<Authorized> next;
  bool speculative = false;
  for (size_t k = 0; k < segs.size(); ++k) {
    Authorized cur;
    if (speculative) {
      cur = next.get();
      speculative = false;
      if (cur.call.code() == Code::kUnavailable) {
        // A speculative authorization that got no answer is retried once,
        // now that the previous READ stage has drained.
        Finish(owner, cur);
        lookahead_retries_.fetch_add(1, std::memory_order_relaxed);
        cur = Authorize(peer, segs[k], /*read_first=*/true);
      }
    } else {
      cur = Authorize(peer, segs[k], /*read_first=*/true);
    }
    if (options_.lookahead && k + 1 < segs.size() && cur.call.ok()) {
      Segment* following = &segs[k + 1];
      next = std::async(std::launch::async,
                        [this, &peer, following] { return Authorize(peer, *following, false); });
      speculative = true;
    }
    bool reachable = cur.call.code() != Code::kUnavailable;
    if (cur.call.ok()) {
      reachable = ReadSegment(peer, segs[k], cur);
    } else {
      for (Item* it : segs[k].items) {
        it->status = NotFound("owner " + peer.node + " refused: " + cur.call.message());
      }
      if (cur.call.code() == Code::kNoSpace) {
        miss_budget_.fetch_add(segs[k].items.size(), std::memory_order_relaxed);
      } else {
        miss_refused_.fetch_add(segs[k].items.size(), std::memory_order_relaxed);
      }
    }
    Finish(owner, cur);
    if (!reachable) {
      if (speculative) {  // the grant for the next stage is of no use now
        Authorized unused = next.get();
        speculative = false;
        lookahead_discarded_.fetch_add(1, std::memory_order_relaxed);
        Finish(owner, unused);
      }
      for (size_t r = k + 1; r < segs.size(); ++r) {
        for (Item* it : segs[r].items) {
          it->status = NotFound("owner " + peer.node + " is unreachable");
          miss_read_.fetch_add(1, std::memory_order_relaxed);
        }
      }
      return;
    }
  }
}

bool RemoteFetcher::AcquireSlot(Peer& peer) {
  std::unique_lock lock(slots_mu_);
  const bool ok =
      slots_cv_.wait_for(lock, std::chrono::milliseconds(options_.authorize_timeout_ms), [&] {
        return peer.slots < options_.per_source_grants && slots_used_ < options_.global_grants;
      });
  if (!ok) return false;
  ++peer.slots;
  ++slots_used_;
  return true;
}

void RemoteFetcher::ReleaseSlot(Peer& peer) {
  {
    std::lock_guard lock(slots_mu_);
    --peer.slots;
    --slots_used_;
  }
  slots_cv_.notify_all();
}

Status RemoteFetcher::Call(Peer& peer, const peer::AuthorizeRequest& req,
                           peer::AuthorizeResponse* resp, EarlyRead* early) {
  auto over_grpc = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(PeerDeadline(options_.authorize_timeout_ms));
    const grpc::Status gs = peer.stub->Authorize(&ctx, req, resp);
    return gs.ok() ? Status::Ok() : FromGrpc(gs);
  };
  if (!options_.authorize_over_data) return over_grpc();
  const std::string request = req.SerializeAsString();
  Result<std::string> answer =
      early == nullptr ? transport_->Authorize(peer.data_endpoint, req.ticket(), request,
                                               options_.authorize_timeout_ms)
                       : transport_->AuthorizeAndRead(peer.data_endpoint, req.ticket(), request,
                                                      options_.authorize_timeout_ms, early->request,
                                                      early->dest, &early->digest, &early->status);
  if (answer.status().code() == Code::kNotSupported) {
    return over_grpc();  // an owner whose data channel does not authorize: nothing was granted
  }
  if (answer.status().code() == Code::kProtocolError) {
    // An unusable reply: whether the owner made a grant is not known.
    return Status(Code::kUnavailable, answer.status().message());
  }
  if (!answer.ok()) return answer.status();
  if (!resp->ParseFromString(*answer)) {
    // Whether the owner made a grant is not known: treated as no answer.
    return Status(Code::kUnavailable, "owner " + peer.node + " sent an unreadable authorization");
  }
  return Status::Ok();
}

RemoteFetcher::Authorized RemoteFetcher::Authorize(Peer& peer, Segment& seg, bool read_first) {
  Authorized a;
  if (!AcquireSlot(peer)) {
    a.call = Status(Code::kNoSpace, "too many grants await release");
    miss_slots_.fetch_add(seg.items.size(), std::memory_order_relaxed);
    return a;
  }
  a.slot = true;
  a.ticket = NewTicket();
  peer::AuthorizeRequest req;
  req.set_requester_node(options_.node_id);
  req.set_requester_uuid(runtime_id_.Get());
  req.set_expect_owner_uuid(peer.uuid);
  req.set_ticket(a.ticket);
  for (const Item* it : seg.items) {
    peer::GrantItem* g = req.add_items();
    g->set_tenant(std::string(it->tenant));
    g->set_key(std::string(it->key));
    g->set_generation(it->any_generation ? 0 : it->loc.generation);
  }
  // Releases waiting for this owner travel with the authorization.
  std::vector<PendingRelease> carried = TakeReleases(peer);
  for (const PendingRelease& r : carried) req.add_release_tickets(r.ticket);
  // The first item's READ rides behind the authorization when it is read
  // whole (in one range however many connections are free): into an
  // allocation made now, from the index's size and generation. (A segment is
  // never empty.)
  Item& first = *seg.items.front();
  const Caller first_caller(kFetchSession, 0, first.loc.name_space);
  EarlyRead early;
  std::optional<AllocGrant> early_grant;
  if (read_first && options_.authorize_over_data && !first.any_generation &&
      RangesFor(first.loc.size, options_.parallel_reads) == 1) {
    Result<AllocGrant> g =
        store_->Alloc(first_caller, {first.tenant, first.key}, first.loc.size, AllocOptions(first));
    if (g.ok()) {
      early_grant = *g;
      early.request = {a.ticket, 0, first.loc.generation, 0, first.loc.size};
      early.dest = g->data;
      peer.inflight_bytes.fetch_add(first.loc.size);
    }
  }
  peer::AuthorizeResponse resp;
  TraceScope trace(Trace().authorize);
  const Status call = Call(peer, req, &resp, early_grant ? &early : nullptr);
  trace.End(call.ok());
  if (call.ok()) {
    for (Item* it : seg.items) it->owner_sequence = resp.sequence();
  }
  if (early_grant) {
    peer.inflight_bytes.fetch_sub(first.loc.size);
    a.first_done = call.ok() && resp.items_size() == static_cast<int>(seg.items.size()) &&
                   first.GrantedAsIndexed(AnswerOf(resp.items(0))) && early.status.ok();
    if (a.first_done) {
      const KnownChecksum verified[] = {{0, first.loc.size, early.digest}};
      first.attempted = true;
      CommitFetched(first, first_caller, early_grant->alloc_id, verified);
      early_reads_.fetch_add(1, std::memory_order_relaxed);
    } else {
      // Refused, not granted, or not read: the READ stage reads it again if
      // it was granted.
      (void)store_->Abort(first_caller, early_grant->alloc_id);
    }
  }
  authorizations_.fetch_add(1, std::memory_order_relaxed);
  if (call.code() != Code::kUnavailable) {
    // Answered: the owner released them before anything else.
    releases_.fetch_add(carried.size(), std::memory_order_relaxed);
    for (const PendingRelease& r : carried) {
      if (r.slot) ReleaseSlot(peer);
    }
  } else if (!carried.empty()) {
    std::lock_guard lock(release_mu_);  // no answer: the releaser sends them alone
    for (PendingRelease& r : carried) releases_q_.push_front(std::move(r));
    release_cv_.notify_one();
  }
  if (!call.ok()) {
    a.call = call;
    if (a.call.code() == Code::kUnavailable) {
      // No answer: the grant may exist all the same; the ticket is released.
      authorize_failures_.fetch_add(1, std::memory_order_relaxed);
    } else {
      a.ticket = 0;  // refused whole: there is no grant
    }
    return a;
  }
  if (static_cast<size_t>(resp.items_size()) != seg.items.size()) {
    a.call = Status(Code::kUnavailable, "owner " + peer.node + " answered " +
                                            std::to_string(resp.items_size()) + " items for " +
                                            std::to_string(seg.items.size()));
    return a;
  }
  for (const peer::GrantedItem& g : resp.items()) a.answers.push_back(AnswerOf(g));
  return a;
}

void RemoteFetcher::Finish(const std::shared_ptr<Peer>& peer, const Authorized& a) {
  if (a.ticket == 0) {
    if (a.slot) ReleaseSlot(*peer);
    return;
  }
  {
    std::lock_guard lock(release_mu_);
    if (!release_stop_) {
      releases_q_.push_back({peer, a.ticket, a.slot, std::chrono::steady_clock::now()});
      // Fetches one after another each queue a release: only an idle releaser
      // is woken, not one already sleeping until an earlier release is due.
      if (releaser_idle_) release_cv_.notify_one();
      return;
    }
  }
  Release(*peer, a.ticket);  // stopping: no releaser thread any more
  if (a.slot) ReleaseSlot(*peer);
}

std::vector<RemoteFetcher::PendingRelease> RemoteFetcher::TakeReleases(const Peer& peer) {
  std::vector<PendingRelease> out;
  std::lock_guard lock(release_mu_);
  for (auto it = releases_q_.begin(); it != releases_q_.end() && out.size() < 64;) {
    if (it->peer.get() == &peer) {
      out.push_back(std::move(*it));
      it = releases_q_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void RemoteFetcher::ReleaserLoop() {
  // A release waits up to kReleaseLinger for the next authorization to the
  // same owner to carry it (one RPC fewer per fetch); then it is sent alone.
  constexpr auto kReleaseLinger = std::chrono::milliseconds(2);
  std::unique_lock lock(release_mu_);
  for (;;) {
    releaser_idle_ = true;
    release_cv_.wait(lock, [this] { return release_stop_ || !releases_q_.empty(); });
    releaser_idle_ = false;
    if (releases_q_.empty()) return;  // stopping, and nothing left
    if (!release_stop_) {
      const auto due = releases_q_.front().queued + kReleaseLinger;
      release_cv_.wait_until(lock, due, [this] { return release_stop_ || releases_q_.empty(); });
      if (releases_q_.empty() ||
          (!release_stop_ &&
           std::chrono::steady_clock::now() < releases_q_.front().queued + kReleaseLinger)) {
        continue;
      }
    }
    PendingRelease r = std::move(releases_q_.front());
    releases_q_.pop_front();
    lock.unlock();
    Release(*r.peer, r.ticket);
    if (r.slot) ReleaseSlot(*r.peer);
    lock.lock();
  }
}

void RemoteFetcher::Release(Peer& peer, uint64_t ticket) {
  peer::ReleaseRequest req;
  req.set_requester_uuid(runtime_id_.Get());
  req.set_ticket(ticket);
  peer::ReleaseResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(PeerDeadline(options_.release_timeout_ms));
  const grpc::Status gs = peer.stub->Release(&ctx, req, &resp);
  if (gs.ok()) {
    releases_.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Left to the owner's grant deadline; that is no proof the READs drained.
    release_failures_.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("release of ticket {} on {} failed: {}", ticket, peer.node, gs.error_message());
  }
}

bool RemoteFetcher::ReadSegment(Peer& peer, Segment& seg, const Authorized& auth) {
  std::vector<uint32_t> granted;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < seg.items.size(); ++i) {
    const GrantAnswer& ans = auth.answers[i];
    Item& it = *seg.items[i];
    if (i == 0 && auth.first_done) continue;  // read behind the authorization
    if (it.GrantedAsIndexed(ans)) {
      it.loc.generation = ans.generation;  // the same, or the one any_generation got
      it.loc.size = ans.size;
      granted.push_back(i);
      bytes += ans.size;
      continue;
    }
    const bool budget = ans.status.code() == Code::kNoSpace;
    (budget ? miss_budget_ : miss_refused_).fetch_add(1, std::memory_order_relaxed);
    it.stale = ans.status.code() == Code::kNotFound;
    it.status = NotFound("owner " + peer.node + " refused " + std::string(it.key) + ": " +
                         (ans.status.ok() ? "size changed" : ans.status.message()));
  }
  std::atomic<bool> reachable{true};
  std::atomic<size_t> next{0};
  const size_t width = bytes < (1u << 20) ? 1 : std::min(options_.parallel_reads, granted.size());
  // The data connections the items' READs leave free carry ranges of one item.
  const size_t ranges = std::max<size_t>(1, options_.parallel_reads / std::max<size_t>(1, width));
  auto work = [&] {
    for (size_t n = next.fetch_add(1); n < granted.size() && reachable.load();
         n = next.fetch_add(1)) {
      const uint32_t idx = granted[n];
      seg.items[idx]->attempted = true;
      Status st = ReadOne(peer, *seg.items[idx], auth.ticket, idx, auth.answers[idx], ranges);
      if (st.code() == Code::kUnavailable) reachable.store(false);
    }
  };
  std::vector<std::thread> extra;
  for (size_t w = 1; w < width; ++w) extra.emplace_back(work);
  work();
  for (std::thread& t : extra) t.join();
  if (!reachable.load()) {
    for (uint32_t idx : granted) {
      Item& it = *seg.items[idx];
      if (!it.attempted) {
        it.status = NotFound("owner " + peer.node + " is unreachable");
        miss_read_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  return reachable.load();
}

Status RemoteFetcher::ReadRanges(Peer& peer, uint64_t ticket, uint32_t index,
                                 const GrantAnswer& ans, uint8_t* dest, size_t ranges,
                                 std::vector<KnownChecksum>* verified) {
  ranges = RangesFor(ans.size, ranges);
  verified->assign(ranges, KnownChecksum{});
  if (ranges == 1) {
    (*verified)[0].length = ans.size;
    return transport_->Read(peer.data_endpoint, {ticket, index, ans.generation, 0, ans.size}, dest,
                            &(*verified)[0].digest);
  }
  // Whole pages per range (the last takes the rest).
  const uint64_t step = (ans.size / ranges + 4095) & ~uint64_t{4095};
  std::vector<Status> got(ranges);
  auto read = [&](size_t r) {
    const uint64_t off = r * step;
    const uint64_t len = r + 1 == ranges ? ans.size - off : step;
    (*verified)[r].offset = off;
    (*verified)[r].length = len;
    got[r] = transport_->Read(peer.data_endpoint, {ticket, index, ans.generation, off, len},
                              dest + off, &(*verified)[r].digest);
  };
  std::vector<std::thread> others;
  for (size_t r = 1; r < ranges; ++r) others.emplace_back(read, r);
  read(0);
  for (std::thread& t : others) t.join();
  // An unreachable owner first (it ends the plan), else the first failure.
  for (const Status& st : got) {
    if (st.code() == Code::kUnavailable) return st;
  }
  for (Status& st : got) {
    if (!st.ok()) return std::move(st);
  }
  return Status::Ok();
}

Status RemoteFetcher::ReadOne(Peer& peer, Item& item, uint64_t ticket, uint32_t index,
                              const GrantAnswer& ans, size_t ranges) {
  const std::string name_space = item.loc.name_space;
  const Caller caller(kFetchSession, 0, name_space);
  Result<AllocGrant> g =
      store_->Alloc(caller, {item.tenant, item.key}, ans.size, AllocOptions(item));
  if (!g.ok() && g.status().code() == Code::kDuplicated && !item.only_owner.empty()) {
    bool not_held = false;
    const Status st = CompareHeld(peer, item, ticket, index, ans, ranges, &not_held);
    if (!not_held) return st;
    // Removed here between the two: the source's value is stored after all.
    g = store_->Alloc(caller, {item.tenant, item.key}, ans.size, {});
  }
  if (!g.ok()) {
    if (g.status().code() == Code::kDuplicated) {
      if (!item.only_owner.empty()) {
        item.status = NotFound("held here, and replaced here while it was pulled");
        return Status::Ok();
      }
      item.status = Status::Ok();  // stored here meanwhile
      return Status::Ok();
    }
    miss_local_space_.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("no room for it here: " + g.status().message());
    return Status::Ok();
  }
  peer.inflight_bytes.fetch_add(ans.size);
  TraceScope read_trace(Trace().read);
  std::vector<KnownChecksum> verified;  // kept with the value: a READ from here sends them
  const Status st = ReadRanges(peer, ticket, index, ans, g->data, ranges, &verified);
  read_trace.End(st.ok());
  peer.inflight_bytes.fetch_sub(ans.size);
  if (!st.ok()) {
    (void)store_->Abort(caller, g->alloc_id);
    miss_read_.fetch_add(1, std::memory_order_relaxed);
    item.status = NotFound("READ from " + peer.node + " failed: " + st.message());
    return st;
  }
  CommitFetched(item, caller, g->alloc_id, verified);
  return Status::Ok();
}

void RemoteFetcher::CommitFetched(Item& item, const Caller& caller, uint64_t alloc_id,
                                  std::span<const KnownChecksum> verified) {
  TraceScope store_trace(Trace().store);
  uint64_t generation = 0;
  const Status c = store_->Commit(caller, alloc_id, verified, &generation);
  store_trace.End(c.ok());
  if (!c.ok()) {
    item.status = NotFound("fetched, but not stored here: " + c.message());
    return;
  }
  if (copies_ != nullptr && item.only_owner.empty() &&
      !copies_->Track(
          item.tenant, item.key, generation,
          {item.loc.owner, item.loc.owner_uuid, item.loc.generation, item.owner_sequence},
          item.keep_superseded)) {
    if (item.keep_superseded) {  // the caller reads it once, then removes it
      item.superseded = generation;
      objects_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(item.loc.size, std::memory_order_relaxed);
      item.status = Status::Ok();
      return;
    }
    // Replaced or removed on its owner while it was read: routed again.
    item.stale = true;
    item.status = NotFound(item.loc.owner + " replaced or removed " + std::string(item.key) +
                           " while it was read");
    return;
  }
  objects_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(item.loc.size, std::memory_order_relaxed);
  item.status = Status::Ok();
}

PutOptions RemoteFetcher::AllocOptions(const Item& item) {
  PutOptions o;
  o.dram_only = item.only_owner.empty();  // a drain's value is this manager's own
  return o;
}

RemoteReadStats RemoteFetcher::Stats() const {
  RemoteReadStats s;
  s.fetches = fetches_.load();
  s.objects = objects_.load();
  s.bytes = bytes_.load();
  s.miss_not_indexed = miss_not_indexed_.load();
  s.miss_refused = miss_refused_.load();
  s.miss_budget = miss_budget_.load();
  s.miss_read = miss_read_.load();
  s.miss_local_space = miss_local_space_.load();
  s.miss_slots = miss_slots_.load();
  s.authorizations = authorizations_.load();
  s.authorize_failures = authorize_failures_.load();
  s.releases = releases_.load();
  s.release_failures = release_failures_.load();
  s.lookahead_discarded = lookahead_discarded_.load();
  s.lookahead_retries = lookahead_retries_.load();
  s.shared_flights = shared_flights_.load();
  s.stale_retries = stale_retries_.load();
  s.early_reads = early_reads_.load();
  if (copies_ != nullptr) {
    const CopyStats c = copies_->Stats();
    s.copies = c.tracked;
    s.copies_dropped_stale = c.dropped_stale;
    s.copies_dropped_lost = c.dropped_lost;
  }
  {
    std::lock_guard lock(slots_mu_);
    s.grants_awaiting_release = slots_used_;
  }
  return s;
}

}  // namespace tierkv
