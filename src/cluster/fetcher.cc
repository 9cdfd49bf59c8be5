#include "cluster/fetcher.h"

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

using fetcher_internal::RangesFor;
using fetcher_internal::Trace;

namespace {

// Rounds of routing again for keys refused as stale (an owner that replaces a
// value faster than a round takes can make each round stale again).
constexpr int kStaleRounds = 3;

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
                             transfer::DataTransport* transport, CopyTracker* copies,
                             GrantClient* grant_client)
    : options_(std::move(options)),
      store_(store),
      index_(index),
      transport_(transport),
      copies_(copies),
      own_grant_client_(grant_client ? nullptr : MakeGrpcGrantClient(options_.credentials)),
      grant_client_(grant_client ? grant_client : own_grant_client_.get()) {
  // A release waits up to 2 ms for the next authorization to the same owner
  // to carry it (one call fewer per fetch); then it is sent alone.
  releaser_ = std::make_unique<GrantReleaser>(
      [this](const PendingRelease& r) {
        Release(*r.peer, r.ticket);
        if (r.slot) ReleaseSlot(*r.peer);
      },
      std::chrono::milliseconds(2));
}

RemoteFetcher::~RemoteFetcher() {
  releaser_.reset();  // sends what is queued (each bounded by the release deadline)
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
    next.emplace(m.node_id, std::move(p));
  }
  std::vector<std::string> moved;  // peer endpoints
  for (const auto& [node, p] : peers_) {
    auto it = next.find(node);
    if (it == next.end() || it->second->data_endpoint != p->data_endpoint) {
      gone.push_back(p->data_endpoint);
    }
    if (it == next.end() || it->second->endpoint != p->endpoint) moved.push_back(p->endpoint);
  }
  peers_.swap(next);
  for (const std::string& ep : gone) transport_->Forget(ep);
  for (const std::string& ep : moved) grant_client_->Forget(ep);
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
  counters_.fetches.fetch_add(keys.size(), std::memory_order_relaxed);
  std::vector<Item> items = ItemsFor(tenant, keys);
  std::vector<std::string> composites(keys.size());
  std::vector<SingleFlight<std::string, Status>::Joined> flights(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].keep_superseded = superseded != nullptr;
    composites[i].reserve(tenant.size() + 1 + keys[i].size());
    composites[i].append(tenant).push_back('\0');
    composites[i].append(keys[i]);
    flights[i] = flights_.Join(composites[i]);
  }
  // Route and fetch every key this call leads.
  std::vector<Item*> todo;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (flights[i].leader) todo.push_back(&items[i]);
  }
  RunRounds(tenant, std::move(todo));
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
    counters_.shared_flights.fetch_add(1, std::memory_order_relaxed);
    std::optional<Status> done = flights[i].ticket->WaitFor(std::chrono::seconds(60));
    out[i] = done ? std::move(*done) : NotFound("a concurrent fetch of this key did not end");
  }
  trace.End(std::all_of(out.begin(), out.end(), [](const Status& st) { return st.ok(); }));
  return out;
}

std::vector<Result<uint64_t>> RemoteFetcher::FetchInto(std::string_view tenant,
                                                       std::span<const std::string_view> keys,
                                                       std::span<const IntoDest> dests) {
  TraceScope trace(Trace().fetch);
  counters_.fetches.fetch_add(keys.size(), std::memory_order_relaxed);
  // Each call reads its own bytes into its own memory: no flight is shared.
  std::vector<Item> items = ItemsFor(tenant, keys);
  for (size_t i = 0; i < keys.size(); ++i) items[i].into = &dests[i];
  RunRounds(tenant, PointersTo(items));
  std::vector<Result<uint64_t>> out;
  out.reserve(keys.size());
  bool all = true;
  for (Item& it : items) {
    all = all && it.status.ok();
    out.push_back(it.status.ok() ? Result<uint64_t>(it.read_size)
                                 : Result<uint64_t>(std::move(it.status)));
  }
  trace.End(all);
  return out;
}

void RemoteFetcher::RunRounds(std::string_view tenant, std::vector<Item*> round) {
  // A key its owner refused as gone or replaced is asked again, up to
  // kStaleRounds times: of the same owner for whatever value it holds
  // (generation 0), or, when the index names the key on other managers only
  // by now, of one of them.
  RunPlans(round);
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
      counters_.stale_retries.fetch_add(1, std::memory_order_relaxed);
      again.push_back(it);
    }
    if (again.empty()) break;
    RunPlans(again);
    round = std::move(again);
  }
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
        counters_.miss_not_indexed.fetch_add(1, std::memory_order_relaxed);
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
      counters_.miss_not_indexed.fetch_add(1, std::memory_order_relaxed);
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
        counters_.lookahead_retries.fetch_add(1, std::memory_order_relaxed);
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
      reachable = reader_.ReadSegment(peer, segs[k], cur);
    } else {
      for (Item* it : segs[k].items) {
        it->status = NotFound("owner " + peer.node + " refused: " + cur.call.message());
      }
      if (cur.call.code() == Code::kNoSpace) {
        counters_.miss_budget.fetch_add(segs[k].items.size(), std::memory_order_relaxed);
      } else {
        counters_.miss_refused.fetch_add(segs[k].items.size(), std::memory_order_relaxed);
      }
    }
    Finish(owner, cur);
    if (!reachable) {
      if (speculative) {  // the grant for the next stage is of no use now
        Authorized unused = next.get();
        speculative = false;
        counters_.lookahead_discarded.fetch_add(1, std::memory_order_relaxed);
        Finish(owner, unused);
      }
      for (size_t r = k + 1; r < segs.size(); ++r) {
        for (Item* it : segs[r].items) {
          it->status = NotFound("owner " + peer.node + " is unreachable");
          counters_.miss_read.fetch_add(1, std::memory_order_relaxed);
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
    return grant_client_->Authorize(peer.endpoint, req, resp, options_.authorize_timeout_ms);
  };
  if (!options_.authorize_over_data) return over_grpc();
  const std::string request = req.SerializeAsString();
  Result<std::string> answer =
      early == nullptr ? transport_->Authorize(peer.data_endpoint, req.ticket(), request,
                                               options_.authorize_timeout_ms)
                       : transport_->AuthorizeAndRead(peer.data_endpoint, req.ticket(), request,
                                                      options_.authorize_timeout_ms, early->request,
                                                      early->dest, &early->digest, &early->status);
  if (early != nullptr && early->status.code() == Code::kIoError) {
    counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
  }
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
    counters_.miss_slots.fetch_add(seg.items.size(), std::memory_order_relaxed);
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
  std::vector<PendingRelease> carried = releaser_->TakeFor(peer, 64);
  for (const PendingRelease& r : carried) req.add_release_tickets(r.ticket);
  // The first item's READ rides behind the authorization when it is read
  // whole (in one range however many connections are free): into its
  // registered memory (FetchInto), or into an allocation made now, from the
  // index's size and generation. (A segment is never empty.)
  Item& first = *seg.items.front();
  const Caller first_caller(kFetchSession, 0, first.loc.name_space);
  EarlyRead early;
  bool early_sent = false;
  std::optional<AllocGrant> early_grant;
  if (read_first && options_.authorize_over_data && !first.any_generation &&
      RangesFor(first.loc.size, options_.parallel_reads) == 1) {
    if (first.into != nullptr) {
      early_sent = first.into->Fits(first.loc.size).ok();
      if (early_sent) early.dest = SliceOf(first.into->pieces, 0, first.loc.size);
    } else {
      Result<AllocGrant> g = store_->Alloc(first_caller, {first.tenant, first.key}, first.loc.size,
                                           SegmentReader::AllocOptions(first));
      if (g.ok()) {
        early_grant = *g;
        early_sent = true;
        early.dest = {{g->data, first.loc.size}};
      }
    }
    if (early_sent) {
      early.request = {a.ticket, 0, first.loc.generation, 0, first.loc.size};
      peer.inflight_bytes.fetch_add(first.loc.size);
    }
  }
  peer::AuthorizeResponse resp;
  TraceScope trace(Trace().authorize);
  const Status call = Call(peer, req, &resp, early_sent ? &early : nullptr);
  trace.End(call.ok());
  if (call.ok()) {
    for (Item* it : seg.items) it->owner_sequence = resp.sequence();
  }
  if (early_sent) {
    peer.inflight_bytes.fetch_sub(first.loc.size);
    a.first_done = call.ok() && resp.items_size() == static_cast<int>(seg.items.size()) &&
                   first.GrantedAsIndexed(AnswerOf(resp.items(0))) && early.status.ok();
    if (a.first_done) {
      first.attempted = true;
      counters_.early_reads.fetch_add(1, std::memory_order_relaxed);
      if (early_grant) {
        const KnownChecksum verified[] = {{0, first.loc.size, early.digest}};
        reader_.CommitFetched(first, first_caller, early_grant->alloc_id, verified);
      } else {
        reader_.FinishInto(first, first.loc.size);
      }
    } else if (early_grant) {
      // Refused, not granted, or not read: the READ stage reads it again if
      // it was granted.
      (void)store_->Abort(first_caller, early_grant->alloc_id);
    }
  }
  counters_.authorizations.fetch_add(1, std::memory_order_relaxed);
  if (call.code() != Code::kUnavailable) {
    // Answered: the owner released them before anything else.
    counters_.releases.fetch_add(carried.size(), std::memory_order_relaxed);
    for (const PendingRelease& r : carried) {
      if (r.slot) ReleaseSlot(peer);
    }
  } else {
    releaser_->Return(std::move(carried));  // no answer: the releaser sends them alone
  }
  if (!call.ok()) {
    a.call = call;
    if (a.call.code() == Code::kUnavailable) {
      // No answer: the grant may exist all the same; the ticket is released.
      counters_.authorize_failures.fetch_add(1, std::memory_order_relaxed);
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
  if (releaser_->Queue({peer, a.ticket, a.slot, {}})) return;
  Release(*peer, a.ticket);  // stopping: no releaser thread any more
  if (a.slot) ReleaseSlot(*peer);
}

void RemoteFetcher::Release(Peer& peer, uint64_t ticket) {
  peer::ReleaseRequest req;
  req.set_requester_uuid(runtime_id_.Get());
  req.set_ticket(ticket);
  const Status st = grant_client_->Release(peer.endpoint, req, options_.release_timeout_ms);
  if (st.ok()) {
    counters_.releases.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Left to the owner's grant deadline; that is no proof the READs drained.
    counters_.release_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("release of ticket {} on {} failed: {}", ticket, peer.node, st.ToString());
  }
}

FetchStats RemoteFetcher::Stats() const {
  FetchStats s;
  const auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.fetches = get(counters_.fetches);
  s.objects = get(counters_.objects);
  s.bytes = get(counters_.bytes);
  s.miss_not_indexed = get(counters_.miss_not_indexed);
  s.miss_refused = get(counters_.miss_refused);
  s.miss_budget = get(counters_.miss_budget);
  s.miss_read = get(counters_.miss_read);
  s.miss_local_space = get(counters_.miss_local_space);
  s.miss_slots = get(counters_.miss_slots);
  s.authorizations = get(counters_.authorizations);
  s.authorize_failures = get(counters_.authorize_failures);
  s.releases = get(counters_.releases);
  s.release_failures = get(counters_.release_failures);
  s.lookahead_discarded = get(counters_.lookahead_discarded);
  s.lookahead_retries = get(counters_.lookahead_retries);
  s.shared_flights = get(counters_.shared_flights);
  s.stale_retries = get(counters_.stale_retries);
  s.early_reads = get(counters_.early_reads);
  s.checksum_failures = get(counters_.checksum_failures);
  s.into_objects = get(counters_.into_objects);
  s.into_bytes = get(counters_.into_bytes);
  {
    std::lock_guard lock(slots_mu_);
    s.grants_awaiting_release = slots_used_;
  }
  return s;
}

}  // namespace tierkv
