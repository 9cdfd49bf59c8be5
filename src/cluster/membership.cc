#include "cluster/membership.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <nlohmann/json.hpp>
#include <set>

namespace tierkv {
namespace {

using Json = nlohmann::json;
using etcd::Compare;
using etcd::Op;

std::string RandomUuid() {
  unsigned char b[16] = {};
  if (getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    for (unsigned char& c : b) c = static_cast<unsigned char>(std::rand());
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // variant 1
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

Compare Absent(const std::string& key) {
  return Compare{key, Compare::kCreate, Compare::kEqual, 0, ""};
}

Op PutOp(const std::string& key, const std::string& value, int64_t lease = 0) {
  return Op{Op::kPut, key, value, lease, false};
}

Op GetOp(const std::string& key, bool prefix = false) { return Op{Op::kGet, key, "", 0, prefix}; }

std::optional<uint64_t> ParseNumber(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(s);
}

std::optional<MemberView> ParseMember(const std::string& value) {
  Json j = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  MemberView m;
  try {
    m.node_id = j.at("node_id").get<std::string>();
    m.rank = j.at("rank").get<uint32_t>();
    m.endpoint = j.value("endpoint", "");
    m.data_endpoint = j.value("data_endpoint", "");
    m.rest_url = j.value("rest_url", "");
    m.runtime_uuid = j.value("runtime_uuid", "");
    m.incarnation = j.value("incarnation", uint64_t{0});
    m.epoch = j.value("epoch", uint64_t{0});
    m.stream_protocol = j.value("stream_protocol", "");
    m.since_unix_ms = j.value("since_ms", int64_t{0});
  } catch (const Json::exception&) {
    return std::nullopt;
  }
  return m;
}

}  // namespace

Membership::Membership(MembershipOptions options, etcd::Client* client, const Clock* clock)
    : options_(std::move(options)),
      prefix_(Prefix(options_.cluster)),
      client_(client),
      clock_(clock),
      runtime_uuid_(RandomUuid()),
      keeper_(client, clock),
      watcher_(client, prefix_, options_.resync_ms, options_.scheduler) {}

Membership::~Membership() { Shutdown(); }

Result<uint64_t> Membership::NextCounterValue(const std::string& name) {
  const std::string key = Key("counters/" + name);
  for (int attempt = 0; attempt < 8; ++attempt) {
    Result<etcd::RangeResult> cur = client_->Get(key);
    if (!cur.ok()) return cur.status();
    uint64_t last = 0;
    Compare unchanged = Absent(key);
    if (!cur->kvs.empty()) {
      last = ParseNumber(cur->kvs[0].value).value_or(0);
      unchanged = Compare{key, Compare::kMod, Compare::kEqual, cur->kvs[0].mod_revision, ""};
    }
    Result<etcd::TxnResult> r =
        client_->Txn({unchanged}, {PutOp(key, std::to_string(last + 1))}, {});
    if (!r.ok()) return r.status();
    if (r->succeeded) return last + 1;
  }
  return Status(Code::kUnavailable, "the counter " + name + " kept moving; try again");
}

Status Membership::CheckFormat() {
  Json mine = {{"stream_protocol", kStreamProtocol}, {"cluster_uuid", RandomUuid()}};
  Result<etcd::TxnResult> r = client_->Txn(
      {Absent(Key("format"))}, {PutOp(Key("format"), mine.dump())}, {GetOp(Key("format"))});
  if (!r.ok()) return r.status();
  if (r->succeeded) {
    cluster_uuid_ = mine["cluster_uuid"];
    spdlog::info("cluster {}: created the format record ({}, cluster uuid {})", options_.cluster,
                 kStreamProtocol, cluster_uuid_);
    return Status::Ok();
  }
  std::string theirs = "an unreadable record";
  if (!r->gets.empty() && !r->gets[0].kvs.empty()) {
    Json j = Json::parse(r->gets[0].kvs[0].value, nullptr, false);
    if (j.is_object() && j.contains("stream_protocol") && j["stream_protocol"].is_string()) {
      theirs = j["stream_protocol"].get<std::string>();
      if (theirs == kStreamProtocol && j.contains("cluster_uuid") &&
          j["cluster_uuid"].is_string()) {
        cluster_uuid_ = j["cluster_uuid"];
        return Status::Ok();
      }
    }
  }
  return InvalidArgument("cluster " + options_.cluster + " in etcd has format " + theirs +
                         ", this manager speaks " + kStreamProtocol +
                         "; upgrade every manager of the cluster together");
}

Result<uint32_t> Membership::ClaimRank() {
  const std::string mine = Key("ranks/" + options_.node_id);
  for (int attempt = 0; attempt < 16; ++attempt) {
    Result<etcd::RangeResult> owners = client_->Get(Key("rank-owners/"), /*prefix=*/true);
    if (!owners.ok()) return owners.status();
    Result<etcd::RangeResult> kept = client_->Get(mine);
    if (!kept.ok()) return kept.status();
    std::map<uint32_t, std::string> owner_of;
    for (const etcd::KeyValue& kv : owners->kvs) {
      if (auto n = ParseNumber(kv.key.substr(Key("rank-owners/").size()))) {
        owner_of[static_cast<uint32_t>(*n)] = kv.value;
      }
    }
    std::optional<uint32_t> want = options_.rank;
    if (!want && !kept->kvs.empty()) {
      if (auto n = ParseNumber(kept->kvs[0].value)) want = static_cast<uint32_t>(*n);
    }
    if (!want) {
      uint32_t r = 0;
      while (owner_of.count(r) != 0) ++r;
      want = r;
    }
    auto it = owner_of.find(*want);
    if (it != owner_of.end()) {
      if (it->second != options_.node_id) {
        return InvalidArgument("rank " + std::to_string(*want) + " belongs to node " + it->second +
                               " in cluster " + options_.cluster);
      }
      if (!kept->kvs.empty() && kept->kvs[0].value == std::to_string(*want)) return *want;
    }
    const std::string owner_key = Key("rank-owners/" + std::to_string(*want));
    std::vector<Compare> cmp;
    if (it == owner_of.end()) cmp.push_back(Absent(owner_key));
    Result<etcd::TxnResult> r = client_->Txn(
        cmp, {PutOp(owner_key, options_.node_id), PutOp(mine, std::to_string(*want))}, {});
    if (!r.ok()) return r.status();
    if (r->succeeded) return *want;  // else another node took it meanwhile: look again
  }
  return Status(Code::kUnavailable, "could not claim a rank (too much contention)");
}

Result<uint32_t> Membership::Prepare() {
  if (Status st = CheckFormat(); !st.ok()) return st;
  Result<uint32_t> rank = ClaimRank();
  if (!rank.ok()) return rank.status();
  rank_ = *rank;
  return rank_;
}

std::string Membership::MemberRecord() const {
  Json j = {{"node_id", options_.node_id},        {"rank", rank_},
            {"endpoint", options_.endpoint},      {"data_endpoint", options_.data_endpoint},
            {"rest_url", options_.rest_url},      {"runtime_uuid", runtime_uuid_},
            {"incarnation", epoch_.load()},       {"epoch", epoch_.load()},
            {"stream_protocol", kStreamProtocol}, {"since_ms", registered_at_ms_}};
  return j.dump();
}

Status Membership::RegisterIncarnation() {
  const int64_t sent = clock_->NowNanos();
  Result<etcd::LeaseGrant> lease = client_->GrantLease(options_.ttl_secs);
  if (!lease.ok()) return lease.status();
  lease_id_ = lease->id;
  granted_ttl_ = lease->ttl_secs;
  const std::string member_key = Key("members/" + options_.node_id);
  const std::string epoch_key = Key("epochs/" + options_.node_id);
  const std::string uuid = runtime_uuid();
  registered_at_ms_ = clock_->NowUnixMillis();
  Status outcome = Status(Code::kUnavailable, "registration did not settle");
  for (int attempt = 0; attempt < 8; ++attempt) {
    Result<etcd::RangeResult> cur = client_->Get(epoch_key);
    if (!cur.ok()) {
      outcome = cur.status();
      break;
    }
    uint64_t epoch = 0;
    Compare same_epoch = Absent(epoch_key);
    if (!cur->kvs.empty()) {
      epoch = ParseNumber(cur->kvs[0].value).value_or(0);
      same_epoch = Compare{epoch_key, Compare::kMod, Compare::kEqual, cur->kvs[0].mod_revision, ""};
    }
    epoch_ = epoch + 1;
    Result<etcd::TxnResult> r = client_->Txn({Absent(member_key), same_epoch},
                                             {PutOp(epoch_key, std::to_string(epoch_.load())),
                                              PutOp(member_key, MemberRecord(), lease_id_)},
                                             {GetOp(member_key)});
    if (!r.ok()) {
      outcome = r.status();
      break;
    }
    if (r->succeeded) {
      outcome = Status::Ok();
      break;
    }
    if (!r->gets.empty() && !r->gets[0].kvs.empty()) {
      std::optional<MemberView> live = ParseMember(r->gets[0].kvs[0].value);
      if (live && live->runtime_uuid == uuid) {  // our own retried write
        outcome = Status::Ok();
        break;
      }
      outcome = Status(Code::kDuplicated,
                       "node id " + options_.node_id + " already has a live member in cluster " +
                           options_.cluster + " (runtime " + (live ? live->runtime_uuid : "?") +
                           "); node ids must be distinct");
      break;
    }
    // The epoch moved under us (a racing registration): read it again.
  }
  if (!outcome.ok()) {
    (void)client_->RevokeLease(lease_id_);
    return outcome;
  }
  valid_until_.store(sent + granted_ttl_ * 1000000000 / 2, std::memory_order_release);
  registered_.store(true, std::memory_order_release);
  spdlog::info(
      "cluster {}: registered node {} (rank {}, epoch {}, runtime {}, lease {:x}, TTL {} s)",
      options_.cluster, options_.node_id, rank_, epoch_.load(), uuid, lease_id_, granted_ttl_);
  return Status::Ok();
}

void Membership::StartIncarnation() {
  keeper_.Start(lease_id_, granted_ttl_,
                {[this](int64_t sent_at, int64_t ttl) {
                   if (fenced_.load(std::memory_order_acquire)) return;
                   const int64_t until = sent_at + ttl * 1000000000 / 2;
                   int64_t prev = valid_until_.load(std::memory_order_relaxed);
                   while (until > prev && !valid_until_.compare_exchange_weak(prev, until)) {
                   }
                 },
                 [this] { Fence("etcd reports the lease gone"); }});
  campaign_ = std::thread([this] { Campaign(); });
}

void Membership::StopIncarnation() {
  keeper_.Stop();  // let the lease expire: peers see us leave
  if (campaign_.joinable()) campaign_.join();
}

Status Membership::Register() {
  if (Status st = RegisterIncarnation(); !st.ok()) return st;
  StartIncarnation();
  watcher_.Start({[this](const auto& kvs, int64_t rev) {
                    ApplyReset(kvs, rev);
                    Notify();
                  },
                  [this](const auto& events, int64_t rev) {
                    ApplyEvents(events, rev);
                    Notify();
                  }});
  Scheduler* scheduler = options_.scheduler ? options_.scheduler : ThreadScheduler();
  std::lock_guard<std::mutex> lock(mu_);
  monitor_ = scheduler->Every(std::chrono::milliseconds(100), [this] { Monitor(); });
  return Status::Ok();
}

Status Membership::Rejoin() {
  // Whatever of the fenced incarnation etcd still holds goes first: its lease
  // (with its campaign key) and its member record, if still bound to it.
  const int64_t old_lease = lease_id_;
  const std::string member_key = Key("members/" + options_.node_id);
  Result<etcd::TxnResult> gone =
      client_->Txn({Compare{member_key, Compare::kLease, Compare::kEqual, old_lease, ""}},
                   {Op{Op::kDelete, member_key, "", 0, false}}, {});
  if (!gone.ok()) return gone.status();  // etcd does not answer yet
  (void)client_->RevokeLease(old_lease);
  const std::string uuid = RandomUuid();
  {
    std::lock_guard lock(id_mu_);
    runtime_uuid_ = uuid;
  }
  // Before the record names it: nothing of the old incarnation survives it.
  if (incarnation_listener_) incarnation_listener_(uuid);
  if (Status st = RegisterIncarnation(); !st.ok()) return st;
  {
    std::lock_guard lock(mu_);
    // Shutting down meanwhile: Leave revokes the new lease with its record.
    if (stopping_) return Status(Code::kUnavailable, "stopping");
    leader_key_.reset();  // the old incarnation's, gone with its lease
    elected_.store(false, std::memory_order_release);
    fenced_.store(false, std::memory_order_release);
  }
  rejoins_.fetch_add(1, std::memory_order_relaxed);
  last_rejoin_ms_.store(clock_->NowUnixMillis(), std::memory_order_relaxed);
  spdlog::warn("cluster {}: node {} joined again as a new incarnation (runtime {}, epoch {})",
               options_.cluster, options_.node_id, uuid, epoch_.load());
  StartIncarnation();
  return Status::Ok();
}

MembershipCounters Membership::counters() const {
  return {fences_.load(), rejoins_.load(), last_rejoin_ms_.load()};
}

bool Membership::ValidAt(int64_t now) const {
  return registered_.load(std::memory_order_acquire) && !fenced_.load(std::memory_order_acquire) &&
         now < valid_until_.load(std::memory_order_acquire);
}

bool Membership::admitting() const { return ValidAt(clock_->NowNanos()); }

void Membership::Fence(const char* why) {
  if (fenced_.exchange(true, std::memory_order_acq_rel)) return;
  elected_.store(false, std::memory_order_release);
  fences_.fetch_add(1, std::memory_order_relaxed);
  spdlog::error(
      "cluster {}: registration of node {} (runtime {}) fenced ({}); serving local DRAM/SSD "
      "only, {}",
      options_.cluster, options_.node_id, runtime_uuid(), why,
      options_.rejoin ? "joining again as a new incarnation once etcd answers"
                      : "not joining again (rejoin is off)");
  if (fence_listener_) fence_listener_();
  cv_.notify_all();
}

// Turns an expired validity into a fence (sticky), stops what a fenced
// registration must not keep doing, and with `rejoin` registers a new
// incarnation once etcd answers again.
void Membership::Monitor() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return;
  if (registered_.load() && !fenced_.load() && !ValidAt(clock_->NowNanos())) {
    lock.unlock();
    Fence("the lease was not renewed within half its TTL");
    lock.lock();
  }
  if (!fenced_.load() || stopping_) return;
  if (!incarnation_stopped_) {
    lock.unlock();
    StopIncarnation();
    lock.lock();
    incarnation_stopped_ = true;
  }
  const int64_t now = clock_->NowNanos();
  if (!options_.rejoin || stopping_ || now < next_rejoin_ns_) return;
  lock.unlock();
  const Status st = Rejoin();
  lock.lock();
  if (st.ok()) {
    incarnation_stopped_ = false;
  } else {
    next_rejoin_ns_ = now + options_.rejoin_retry_ms * 1'000'000;
    spdlog::debug("cluster {}: not joined again yet: {}", options_.cluster, st.ToString());
  }
}

void Membership::Campaign() {
  const std::string name = Key("coordinator");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && !fenced_.load()) {
    lock.unlock();
    Result<etcd::LeaderKey> won = client_->Campaign(name, lease_id_, options_.node_id,
                                                    std::max<int64_t>(granted_ttl_, 5) * 1000);
    lock.lock();
    if (won.ok()) {
      if (stopping_ || fenced_.load()) break;
      leader_key_ = *won;
      elected_.store(true, std::memory_order_release);
      coordinator_changes_.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("cluster {}: node {} is the coordinator", options_.cluster, options_.node_id);
      int64_t compacted_to = 0;
      while (!stopping_ && !fenced_.load()) {
        // Coordinator duty: compact etcd history older than one interval.
        const int64_t head = watcher_.revision();
        cv_.wait_for(lock, std::chrono::milliseconds(options_.compact_every_ms));
        if (stopping_ || fenced_.load()) break;
        if (head > compacted_to) {
          lock.unlock();
          if (client_->Compact(head).ok()) compacted_to = head;
          lock.lock();
        }
      }
      break;
    }
    if (!stopping_) cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

void Membership::ApplyPut(const etcd::KeyValue& kv) {
  const std::string rel = kv.key.substr(prefix_.size());
  if (rel.rfind("members/", 0) == 0) {
    if (std::optional<MemberView> m = ParseMember(kv.value)) members_[rel.substr(8)] = *m;
  } else if (rel.rfind("coordinator/", 0) == 0) {
    candidates_[kv.create_revision] = {kv.key, kv.value};
  }
}

void Membership::UpdateLeaderLocked() {
  const std::string before = leader_node_;
  leader_node_ = candidates_.empty() ? "" : candidates_.begin()->second.second;
  if (leader_node_ != before && !leader_node_.empty()) {
    spdlog::info("cluster {}: coordinator is {}", options_.cluster, leader_node_);
  }
}

void Membership::ApplyReset(const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
  std::lock_guard<std::mutex> lock(view_mu_);
  members_.clear();
  candidates_.clear();
  for (const etcd::KeyValue& kv : kvs) ApplyPut(kv);
  view_revision_ = revision;
  UpdateLeaderLocked();
}

void Membership::ApplyEvents(const std::vector<etcd::WatchEvent>& events, int64_t revision) {
  std::lock_guard<std::mutex> lock(view_mu_);
  for (const etcd::WatchEvent& e : events) {
    if (e.put) {
      ApplyPut(e.kv);
      continue;
    }
    const std::string rel = e.kv.key.substr(prefix_.size());
    if (rel.rfind("members/", 0) == 0) members_.erase(rel.substr(8));
    if (rel.rfind("coordinator/", 0) == 0) {
      for (auto it = candidates_.begin(); it != candidates_.end(); ++it) {
        if (it->second.first == e.kv.key) {
          candidates_.erase(it);
          break;
        }
      }
    }
  }
  view_revision_ = revision;
  UpdateLeaderLocked();
}

void Membership::Notify() {
  if (!listener_) return;
  std::vector<MemberView> members;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    for (const auto& [id, m] : members_) members.push_back(m);
  }
  listener_(members);
}

HaState Membership::Get() const {
  HaState s;
  const int64_t now = clock_->NowNanos();
  const bool valid = ValidAt(now);
  std::lock_guard<std::mutex> lock(view_mu_);
  s.view_version = static_cast<uint64_t>(view_revision_);
  auto leader = members_.find(leader_node_);
  s.leader_present = !leader_node_.empty() && leader != members_.end();
  s.leader_address = s.leader_present ? leader->second.endpoint : "unknown";
  if (fenced_.load()) {
    s.role = "unknown";
    s.ha_state = "standby";
    s.service_ready = true;  // local DRAM/SSD service continues
    s.leader_present = false;
    s.leader_address = "unknown";
  } else if (!registered_.load()) {
    s.role = "unknown";
    s.ha_state = "starting";
    s.service_ready = false;
  } else if (!valid) {
    s.role = "unknown";
    s.ha_state = "unknown";
  } else {
    s.role = elected_.load() && leader_node_ == options_.node_id ? "leader" : "standby";
    s.ha_state = "serving";
  }
  return s;
}

ClusterView Membership::Members() const {
  ClusterView v;
  v.enabled = true;
  v.cluster = options_.cluster;
  v.node_id = options_.node_id;
  v.runtime_uuid = runtime_uuid();
  std::lock_guard<std::mutex> lock(view_mu_);
  v.revision = view_revision_;
  for (const auto& [id, m] : members_) v.members.push_back(m);
  return v;
}

void Membership::BeginShutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  fenced_.store(true);  // no more remote admission from here on
  elected_.store(false);
  std::unique_ptr<PeriodicTask> monitor;
  {
    std::lock_guard<std::mutex> lock(mu_);
    monitor = std::move(monitor_);
  }
  monitor.reset();  // waits for a tick in progress (which takes mu_)
  std::optional<etcd::LeaderKey> leader;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader = leader_key_;
  }
  if (leader) (void)client_->Resign(*leader);
}

void Membership::Leave() {
  BeginShutdown();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (left_) return;
    left_ = true;
  }
  keeper_.Stop();
  if (registered_.load()) {
    // Revoking the lease deletes the member record and our campaign key. The
    // explicit delete covers a revoke whose answer was lost; it only removes a
    // record still bound to our lease, never a newer incarnation's.
    (void)client_->RevokeLease(lease_id_);
    const std::string member_key = Key("members/" + options_.node_id);
    (void)client_->Txn({Compare{member_key, Compare::kLease, Compare::kEqual, lease_id_, ""}},
                       {Op{Op::kDelete, member_key, "", 0, false}}, {});
  }
  watcher_.Stop();
  client_->Cancel();  // a campaign still waiting returns now
  if (campaign_.joinable()) campaign_.join();
  if (registered_.load()) {
    spdlog::info("cluster {}: node {} left", options_.cluster, options_.node_id);
  }
}

}  // namespace tierkv
