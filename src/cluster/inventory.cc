#include "cluster/inventory.h"

#include <google/protobuf/arena.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "cluster/delta_encoder.h"
#include "cluster/inventory_stream.h"
#include "cluster/peer_limits.h"
#include "cluster/peer_rpc.h"

namespace tierkv {
namespace {

// The shortest time between two delta batches of one stream (Serve).
constexpr auto kBatchGap = std::chrono::microseconds(5000);

// The start of the kBatchGap-long slot of the steady clock that holds `t`.
// A stream that sent a batch in one slot sends the next at the start of the
// following slot at the earliest, so the streams of all peers that wait wake
// together: a busy owner's core is taken from its clients once per gap, not
// once per stream.
std::chrono::steady_clock::time_point SlotOf(std::chrono::steady_clock::time_point t) {
  const auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kBatchGap);
  return std::chrono::steady_clock::time_point(t.time_since_epoch() / gap * gap);
}

// The transcript digest: every record's fields in a fixed encoding, in order.
void Digest(XXH3_state_t* st, const peer::InventoryRecord& r) {
  const char nul = 0;
  XXH3_64bits_update(st, r.tenant().data(), r.tenant().size());
  XXH3_64bits_update(st, &nul, 1);
  XXH3_64bits_update(st, r.key().data(), r.key().size());
  XXH3_64bits_update(st, &nul, 1);
  XXH3_64bits_update(st, r.name_space().data(), r.name_space().size());
  XXH3_64bits_update(st, &nul, 1);
  const uint64_t nums[] = {r.medium(), r.size(), r.generation(), r.sequence()};
  XXH3_64bits_update(st, nums, sizeof nums);
}

InventoryDelta FromRecord(const peer::InventoryRecord& r, InventoryDelta::Kind kind) {
  InventoryDelta d;
  d.kind = kind;
  d.tenant = r.tenant();
  d.key = r.key();
  d.name_space = r.name_space();
  d.medium = r.medium() == static_cast<uint32_t>(Medium::kSsd) ? Medium::kSsd : Medium::kDram;
  d.size = r.size();
  d.generation = r.generation();
  return d;
}

// Reads a stream's frames one at a time, each into an arena that starts in a
// block kept from frame to frame: a frame's records, their strings and their
// destruction cost no heap allocation and free until a frame outgrows the
// block. frame() is valid until the next Next().
class FrameReader {
 public:
  explicit FrameReader(grpc::ClientReader<peer::InventoryFrame>& reader)
      : reader_(reader), block_(std::make_unique_for_overwrite<char[]>(kBlockBytes)) {}
  bool Next() {
    frame_ = nullptr;
    arena_.reset();
    google::protobuf::ArenaOptions options;
    options.initial_block = block_.get();
    options.initial_block_size = kBlockBytes;
    arena_.emplace(options);
    frame_ = google::protobuf::Arena::CreateMessage<peer::InventoryFrame>(&*arena_);
    return reader_.Read(frame_);
  }
  const peer::InventoryFrame& frame() const { return *frame_; }

 private:
  static constexpr size_t kBlockBytes = 256 << 10;
  grpc::ClientReader<peer::InventoryFrame>& reader_;
  std::unique_ptr<char[]> block_;
  std::optional<google::protobuf::Arena> arena_;
  peer::InventoryFrame* frame_ = nullptr;
};

}  // namespace

std::string ScopeDigest(const std::string& kind, const std::vector<std::string>& namespaces) {
  std::string canonical = "tierkv-scope/v1:" + kind + ":";
  for (size_t i = 0; i < namespaces.size(); ++i) canonical += (i ? "," : "") + namespaces[i];
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(canonical.data(), canonical.size())));
  return hex;
}

// ---------------------------------------------------------------------------
// Owner side.

void Inventory::Serve(ServeContext& c) {
  if (stopping() || (options_.admitting && !options_.admitting())) {
    c.status =
        grpc::Status(grpc::StatusCode::UNAVAILABLE,
                     "this manager does not admit peers (not registered, fenced or stopping)");
    return;
  }
  if (!c.request->expect_owner_uuid().empty() &&
      c.request->expect_owner_uuid() != runtime_id_.Get()) {
    c.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "this address now serves runtime " + runtime_id_.Get());
    return;
  }
  const std::string requester = c.request->requester_node();
  if (requester.empty()) {
    refused_out_.fetch_add(1, std::memory_order_relaxed);
    c.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "an inventory stream names its requester node");
    return;
  }
  if (options_.members != nullptr) {
    if (Status st = options_.members->Check(requester, c.request->requester_uuid()); !st.ok()) {
      refused_out_.fetch_add(1, std::memory_order_relaxed);
      c.status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, st.message());
      return;
    }
  }
  uint64_t id = 0;
  {
    std::lock_guard lock(served_mu_);
    auto it = served_.find(requester);
    if (it == served_.end() && served_.size() >= kMaxServedRequesters) {
      refused_out_.fetch_add(1, std::memory_order_relaxed);
      c.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "this manager already serves inventory streams to " +
                                  std::to_string(kMaxServedRequesters) + " requester nodes");
      return;
    }
    if (it != served_.end()) {  // the older stream of this requester ends
      it->second.cancel();
      replaced_out_.fetch_add(1, std::memory_order_relaxed);
    }
    id = ++served_ids_;
    // Valid while the entry is there: the call removes it before it returns.
    served_[requester] = Served{id, [ctx = c.server] { ctx->TryCancel(); }};
  }
  streams_out_.fetch_add(1, std::memory_order_relaxed);
  struct Done {
    Inventory& inv;
    const std::string& requester;
    uint64_t id;
    ~Done() {
      inv.streams_out_.fetch_sub(1, std::memory_order_relaxed);
      std::lock_guard lock(inv.served_mu_);
      auto it = inv.served_.find(requester);
      if (it != inv.served_.end() && it->second.id == id) inv.served_.erase(it);
    }
  } done{*this, requester, id};
  const InventoryScope scope(c.request->scope());
  bool alive = true;
  auto write = [&](const peer::InventoryFrame& f) {
    if (!alive) return false;
    frames_out_.fetch_add(1, std::memory_order_relaxed);
    bytes_out_.fetch_add(f.ByteSizeLong(), std::memory_order_relaxed);
    alive = c.writer->Write(f);
    return alive;
  };
  peer::InventoryFrame begin;
  begin.mutable_begin()->set_owner_node(options_.node_id);
  begin.mutable_begin()->set_owner_uuid(runtime_id_.Get());
  begin.mutable_begin()->set_epoch(options_.epoch ? options_.epoch() : 0);
  if (!write(begin)) return;

  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  uint64_t pages = 0, records = 0;
  size_t page_bytes = 0;
  peer::InventoryFrame page;
  auto flush = [&] {
    if (page.page().records_size() == 0) return;
    page.mutable_page()->set_page_no(pages++);
    write(page);
    page.Clear();
    page_bytes = 0;
  };
  const uint64_t watermark =
      store_->admin().Snapshot(options_.page_records, [&](std::span<const SnapshotRecord> part) {
        for (const SnapshotRecord& r : part) {
          if (!alive || !scope.Admits(r.name_space)) continue;
          peer::InventoryRecord* out = page.mutable_page()->add_records();
          ToInventoryRecord(r, out);
          Digest(st, *out);
          ++records;
          page_bytes += PeerRecordBytes(r);
          if (static_cast<size_t>(page.page().records_size()) >= options_.page_records ||
              page_bytes >= kPeerMessageBytes) {
            flush();
          }
        }
      });
  flush();
  peer::InventoryFrame commit;
  auto* cm = commit.mutable_commit();
  cm->set_pages(pages);
  cm->set_records(records);
  cm->set_digest(XXH3_64bits_digest(st));
  cm->set_watermark(watermark);
  XXH3_freeState(st);
  if (!write(commit)) return;
  snapshots_out_.fetch_add(1, std::memory_order_relaxed);

  // Deltas: each change is encoded once for all streams (DeltaEncoder); a
  // batch is this stream's copy of the admitted ones behind its range, which
  // the frame carries as its `delta` field, unparsed.
  const ChangeFeed& feed = store_->feed();
  DeltaEncoder::Reader reader(*encoder_, watermark);
  peer::InventoryFrame encoded;
  std::string& delta = UnparsedDelta(encoded);
  auto last_batch = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  while (alive && !stopping() && !c.server->IsCancelled()) {
    // At most one batch per slot (SlotOf) after the first: a change in the
    // slot of the previous batch waits for the next slot, with those that
    // follow, so a steady stream of puts costs each peer about one frame per
    // kBatchGap, not one per put. A change in a later slot goes out at once.
    std::this_thread::sleep_until(SlotOf(last_batch) + kBatchGap);  // at once when past
    const uint64_t after = reader.after();
    // Never in the middle of an upsert (ChangeFeed::stable_sequence).
    auto until = [&] { return std::min(feed.stable_sequence(), after + options_.page_records); };
    uint64_t end = until();
    if (options_.coalesce_ms > 0 && end > after && end - after < options_.page_records) {
      // A quiet window: more changes that arrive within it share the batch.
      if (feed.WaitAfter(end, options_.coalesce_ms)) end = until();
    }
    if (end == after) {
      if (feed.WaitAfter(after, options_.heartbeat_ms)) continue;
      peer::InventoryFrame f;  // heartbeat: the empty interval
      f.mutable_delta()->set_from_sequence(after + 1);
      f.mutable_delta()->set_to_sequence(after);
      write(f);
      continue;
    }
    // One frame, or several with contiguous ranges when the changes' bytes
    // pass kPeerMessageBytes.
    while (alive && reader.after() < end) {
      const DeltaEncoder::Batch b = encoder_->Next(reader, end, scope, kPeerMessageBytes, delta);
      if (b.behind) {
        peer::InventoryFrame reset;
        reset.set_reset("journal overflow: changes after " + std::to_string(reader.after()) +
                        " are gone (oldest kept " + std::to_string(b.oldest_kept) +
                        "); take a new snapshot");
        write(reset);
        resets_out_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (b.to < b.from) break;  // not reached: `end` is at most the newest change
      write(encoded);
    }
    last_batch = std::chrono::steady_clock::now();
  }
  if (alive && stopping()) {
    peer::InventoryFrame reset;
    reset.set_reset("owner is shutting down");
    write(reset);
  }
}

// ---------------------------------------------------------------------------
// Requester side: one follower per owner.

class Inventory::Follower {
 public:
  Follower(Inventory* inv, MemberView owner) : inv_(inv), owner_(std::move(owner)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Follower() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }
  const MemberView& owner() const { return owner_; }

  // Drops the copies of this owner's values when its stream failed and
  // nothing has come from the owner since `now - lost` (steady clock, ns).
  void DropCopiesIfLost(int64_t now, int64_t lost) {
    const int64_t since = lost_since_ns_.load();
    if (since == 0 || now - since < lost || inv_->copies_ == nullptr) return;
    int64_t expected = since;
    if (lost_since_ns_.compare_exchange_strong(expected, 0)) {
      inv_->copies_->DropOwner(owner_.node_id);
    }
  }

  // Cancels the open stream when it brought nothing since `now - stall`
  // (steady clock, ns); true when it did.
  bool CancelIfStalled(int64_t now, int64_t stall) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_ == nullptr || stalled_ || now - last_frame_ns_.load() < stall) return false;
    stalled_ = true;
    ctx_->TryCancel();
    return true;
  }

 private:
  void Run() {
    auto channel = PeerChannel(owner_.endpoint, inv_->options_.credentials.get());
    auto stub = peer::Peer::NewStub(channel);
    int64_t backoff_ms = 100;
    while (!Stopped()) {
      const bool clean = Stream(*stub);
      if (Stopped()) break;
      inv_->index_->MarkPartial(owner_.node_id, /*reset=*/true);
      // A stream that failed may hide the owner's changes for as long as it
      // stays down: once nothing came from the owner for stall_ms, the copies
      // of its values go (DropCopiesIfLost), unless a new view is installed
      // first. After a clean reset they stay, judged against the snapshot
      // that follows at once.
      if (!clean) {
        int64_t none = 0;
        lost_since_ns_.compare_exchange_strong(none, last_frame_ns_.load());
        DropCopiesIfLost(inv_->clock_->NowNanos(), inv_->options_.stall_ms * 1'000'000);
      }
      if (!clean) {
        inv_->stream_failures_.fetch_add(1, std::memory_order_relaxed);
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [this] { return stop_; });
        backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
      } else {
        backoff_ms = 100;
      }
    }
  }

  bool Stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  // One stream; true when the owner ended it with a reset (re-snapshot now),
  // false on a failure (retry after a pause).
  bool Stream(peer::Peer::Stub& stub) {
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      ctx_ = &ctx;
    }
    last_frame_ns_.store(inv_->clock_->NowNanos());  // the wait for the first frame counts too
    peer::InventoryRequest req;
    req.set_requester_node(inv_->options_.node_id);
    req.set_requester_uuid(inv_->runtime_id_.Get());
    req.set_expect_owner_uuid(owner_.runtime_uuid);
    const std::string& kind = inv_->options_.scope_kind;
    req.mutable_scope()->set_kind(kind == "exact"   ? peer::Scope::EXACT
                                  : kind == "empty" ? peer::Scope::EMPTY
                                                    : peer::Scope::ALL);
    for (const std::string& n : inv_->options_.scope_namespaces)
      req.mutable_scope()->add_namespaces(n);
    auto reader = stub.Inventory(&ctx, req);
    const bool result = Follow(*reader);
    ctx.TryCancel();
    (void)reader->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = nullptr;
    stalled_ = false;
    return result;
  }

  bool Reject(const std::string& why) {
    inv_->index_->CountRejectedView();
    spdlog::warn("inventory of {}: view refused: {}", owner_.node_id, why);
    return false;
  }

  bool Follow(grpc::ClientReader<peer::InventoryFrame>& reader) {
    FrameReader frames(reader);
    auto read = [&] {
      if (!frames.Next()) return false;
      last_frame_ns_.store(inv_->clock_->NowNanos());
      inv_->frames_in_.fetch_add(1, std::memory_order_relaxed);
      inv_->bytes_in_.fetch_add(frames.frame().ByteSizeLong(), std::memory_order_relaxed);
      return true;
    };
    if (!read()) return false;
    // The frame read last (each read replaces it).
    auto f = [&]() -> const peer::InventoryFrame& { return frames.frame(); };
    if (!f().has_begin() || f().begin().owner_node() != owner_.node_id ||
        f().begin().owner_uuid() != owner_.runtime_uuid) {
      return Reject("the stream did not begin with this owner's identity");
    }
    // The snapshot, hidden until it validates.
    GlobalIndex& index = *inv_->index_;
    index.BeginStaging();
    auto view = std::make_unique<OwnerView>();
    uint64_t staged = 0, pages = 0, records = 0;
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    std::vector<InventoryDelta> deltas;
    auto abandon = [&](bool over_budget) {
      XXH3_freeState(st);
      index.AbandonStaging(staged, over_budget);
      return false;
    };
    for (;;) {
      if (!read()) return abandon(false);
      if (f().has_commit()) break;
      if (!f().has_page()) return abandon(false) || Reject("expected a snapshot page");
      if (f().page().page_no() != pages) {
        return abandon(false) || Reject("page " + std::to_string(f().page().page_no()) +
                                        " out of order (expected " + std::to_string(pages) + ")");
      }
      ++pages;
      const size_t before = view->bytes();
      deltas.clear();
      for (const auto& r : f().page().records()) {
        Digest(st, r);
        deltas.push_back(FromRecord(r, InventoryDelta::kStored));
      }
      view->ApplyAll(deltas);
      records += deltas.size();
      const uint64_t grown = view->bytes() - before;
      if (!index.ReserveStaging(grown)) {
        spdlog::warn("inventory of {}: view refused, it would pass --index-budget", owner_.node_id);
        return abandon(true);
      }
      staged += grown;
    }
    const auto& cm = f().commit();
    const uint64_t digest = XXH3_64bits_digest(st);
    if (cm.pages() != pages || cm.records() != records || cm.digest() != digest) {
      return abandon(false) || Reject("snapshot commit does not match what was received");
    }
    XXH3_freeState(st);
    index.Install(owner_.node_id, owner_.runtime_uuid, std::move(view), cm.watermark(), staged);
    lost_since_ns_.store(0);  // the copies are judged against the new view instead
    if (inv_->copies_ != nullptr) inv_->copies_->OnInstalled(owner_.node_id);
    // Deltas, contiguous.
    while (read()) {
      if (f().has_reset()) {
        spdlog::info("inventory of {}: {}", owner_.node_id, f().reset());
        return true;
      }
      if (!f().has_delta()) return Reject("expected a delta batch");
      deltas.clear();
      for (const auto& ch : f().delta().changes()) {
        const auto kind = ch.kind() == peer::InventoryChange::STORED    ? InventoryDelta::kStored
                          : ch.kind() == peer::InventoryChange::REMOVED ? InventoryDelta::kRemoved
                                                                        : InventoryDelta::kCleared;
        deltas.push_back(FromRecord(ch.record(), kind));
      }
      if (!index.ApplyDeltas(owner_.node_id, f().delta().from_sequence(), f().delta().to_sequence(),
                             deltas)) {
        return Reject("delta batch " + std::to_string(f().delta().from_sequence()) + ".." +
                      std::to_string(f().delta().to_sequence()) + " is not contiguous");
      }
      if (inv_->copies_ != nullptr) inv_->copies_->OnChanges(owner_.node_id, deltas);
    }
    return false;
  }

  Inventory* const inv_;
  const MemberView owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  bool stalled_ = false;                   // ctx_ was cancelled for a stall (mu_)
  std::atomic<int64_t> last_frame_ns_{0};  // when the stream last brought a frame
  // When the last frame came before the stream failed (0: not failed since
  // the last view was installed, or its copies already dropped).
  std::atomic<int64_t> lost_since_ns_{0};
  std::thread thread_;
};

Inventory::Inventory(InventoryOptions options, Store* store, GlobalIndex* index,
                     CopyTracker* copies)
    : options_(std::move(options)),
      store_(store),
      index_(index),
      copies_(copies),
      encoder_(std::make_unique<DeltaEncoder>(store->feed())) {
  // A pass when the members change, and at least every quarter of stall_ms to
  // look for silent streams.
  Scheduler* scheduler = options_.scheduler ? options_.scheduler : ThreadScheduler();
  reconciler_ =
      scheduler->Every(std::chrono::milliseconds(std::max<int64_t>(1, options_.stall_ms / 4)),
                       [this] { Reconcile(); });
}

Inventory::~Inventory() { Stop(); }

void Inventory::SetMembers(const std::vector<MemberView>& members) {
  std::map<std::string, GlobalIndex::Expected> expected;
  for (const MemberView& m : members) {
    if (m.node_id != options_.node_id) expected[m.node_id] = {m.runtime_uuid, m.rank, m.epoch};
  }
  index_->SetExpected(expected);  // a member that left is hidden at once
  if (copies_ != nullptr) {
    std::map<std::string, std::string> live;
    for (const auto& [node, id] : expected) live[node] = id.uuid;
    copies_->Retain(live);  // copies of a member that left go with it
  }
  std::lock_guard<std::mutex> lock(mu_);
  wanted_ = members;
  changed_ = true;
  if (reconciler_) reconciler_->Wake();
}

// Starts and stops followers on its own thread, so SetMembers (called from the
// membership watch) never waits for a follower to wind down.
void Inventory::Reconcile() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping()) return;
  const int64_t now = clock_->NowNanos();
  for (auto& [node, follower] : followers_) {
    follower->DropCopiesIfLost(now, options_.stall_ms * 1'000'000);
    if (follower->CancelIfStalled(now, options_.stall_ms * 1'000'000)) {
      stalls_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn(
          "inventory of {}: no frame for {} ms (not even a heartbeat); the stream is "
          "dropped and the view is partial until a new one completes",
          node, options_.stall_ms);
    }
  }
  if (!changed_) return;
  changed_ = false;
  const std::vector<MemberView> members = wanted_;
  std::vector<std::unique_ptr<Follower>> retired;
  const bool restart = std::exchange(restart_followers_, false);
  for (auto it = followers_.begin(); it != followers_.end();) {
    bool keep = false;
    if (restart) {
      retired.push_back(std::move(it->second));
      it = followers_.erase(it);
      continue;
    }
    for (const MemberView& m : members) {
      keep |= m.node_id == it->first && m.runtime_uuid == it->second->owner().runtime_uuid;
    }
    if (keep) {
      ++it;
    } else {
      retired.push_back(std::move(it->second));
      it = followers_.erase(it);
    }
  }
  for (const MemberView& m : members) {
    if (m.node_id == options_.node_id || followers_.count(m.node_id) != 0) continue;
    followers_[m.node_id] = std::make_unique<Follower>(this, m);
  }
  lock.unlock();
  retired.clear();  // joined outside the lock
}

void Inventory::SetRuntimeUuid(const std::string& uuid) {
  runtime_id_.Set(uuid);
  {
    std::lock_guard lock(served_mu_);
    for (auto& [node, served] : served_) served.cancel();  // streams of the old incarnation
  }
  std::lock_guard<std::mutex> lock(mu_);
  restart_followers_ = true;  // they name the requester's incarnation
  changed_ = true;
  if (reconciler_) reconciler_->Wake();
}

void Inventory::Stop() {
  std::unique_ptr<PeriodicTask> reconciler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true, std::memory_order_release);
    reconciler = std::move(reconciler_);
  }
  reconciler.reset();  // waits for a pass in progress (which takes mu_)
  std::map<std::string, std::unique_ptr<Follower>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(followers_);
  }
  all.clear();
}

InventoryStats Inventory::Stats() const {
  InventoryStats s;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.streams_out = get(streams_out_);
  s.frames_out = get(frames_out_);
  s.bytes_out = get(bytes_out_);
  s.frames_in = get(frames_in_);
  s.bytes_in = get(bytes_in_);
  s.snapshots_out = get(snapshots_out_);
  s.resets_out = get(resets_out_);
  s.replaced_out = get(replaced_out_);
  s.refused_out = get(refused_out_);
  s.stream_failures = get(stream_failures_);
  s.stalls = get(stalls_);
  s.delta_buffer_bytes = encoder_->held_bytes();
  return s;
}

}  // namespace tierkv
