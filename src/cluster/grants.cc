#include "cluster/grants.h"

#include <algorithm>
#include <chrono>

namespace tierkv {

struct GrantTable::Grant {
  struct Item {
    bool ok = false;
    PinGrant pin;
  };
  Grant(GrantTable* t, std::string u, uint64_t tk, uint64_t owner)
      : table(t), uuid(std::move(u)), ticket(tk), pin_owner(owner) {}
  ~Grant() {
    table->store_->pins().ReleaseAll(pin_owner);
    table->Ended(uuid, charged);
  }
  GrantTable* const table;
  const std::string uuid;
  const uint64_t ticket;
  const uint64_t pin_owner;
  std::vector<Item> items;  // written before `ready`, read after
  uint64_t charged = 0;     // bytes reserved against the budget
  bool ready = false;       // mu_: items may be read
  int64_t deadline = 0;     // mu_
};

GrantTable::GrantTable(GrantOptions options, Store* store, Clock* clock, Scheduler* scheduler)
    : options_(std::move(options)),
      store_(store),
      clock_(clock != nullptr ? clock : RealClock()),
      scheduler_(scheduler != nullptr ? scheduler : ThreadScheduler()),
      next_pin_owner_((uint64_t{1} << 62) + 1) {}

GrantTable::~GrantTable() { Stop(); }

void GrantTable::Start() {
  std::lock_guard lock(mu_);
  if (reaper_) return;
  stopping_ = false;
  // Periodic maintenance, not synchronisation: deadlines are checked 4x a second.
  reaper_ = scheduler_->Every(std::chrono::milliseconds(250), [this] { ExpireDue(); });
}

void GrantTable::Stop() {
  std::unordered_map<uint64_t, std::shared_ptr<Grant>> dropping;
  std::unique_ptr<PeriodicTask> reaper;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropping.swap(live_);
    reaper = std::move(reaper_);
  }
  reaper.reset();    // waits for a pass in progress
  dropping.clear();  // pins go once the READs still sending end
}

void GrantTable::Ended(const std::string& uuid, uint64_t charged) {
  reserved_.fetch_sub(charged);
  std::lock_guard lock(mu_);
  auto it = open_by_requester_.find(uuid);
  if (it != open_by_requester_.end() && --it->second == 0) open_by_requester_.erase(it);
  ended_cv_.notify_all();
}

uint64_t GrantTable::ChangeSequence() const { return store_->feed().last_sequence(); }

bool GrantTable::PinItems(Grant& grant, std::span<const GrantRequestItem> items,
                          std::vector<GrantAnswer>& answers, bool retry, bool may_rewarm) {
  bool budget_hit = false;
  for (size_t i = 0; i < items.size(); ++i) {
    if (retry && answers[i].status.code() != Code::kNoSpace) continue;
    const GrantRequestItem& it = items[i];
    const uint64_t before = store_->pins().Bytes(grant.pin_owner);
    Result<PinGrant> pin =
        store_->pins().Pin(grant.pin_owner, {it.tenant, it.key}, it.generation, 0, may_rewarm);
    if (!pin.ok()) {
      answers[i].status = pin.status();
      if (!may_rewarm && pin.status().code() == Code::kRetry) return budget_hit;  // needs the disk
      continue;
    }
    const uint64_t delta = store_->pins().Bytes(grant.pin_owner) - before;
    if (reserved_.fetch_add(delta) + delta > options_.budget_bytes) {
      reserved_.fetch_sub(delta);
      (void)store_->pins().Unpin(grant.pin_owner, pin->pin_id);
      answers[i].status =
          Status(Code::kNoSpace, "the owner's transfer budget (" +
                                     std::to_string(options_.budget_bytes) + " bytes) is spent");
      budget_hit = true;
      continue;
    }
    grant.charged += delta;
    grant.items[i] = {true, *pin};
    answers[i] = {Status::Ok(), pin->size, pin->generation};
  }
  return budget_hit;
}

Result<std::vector<GrantAnswer>> GrantTable::Authorize(
    const std::string& node, const std::string& uuid, const std::string& expect_owner_uuid,
    uint64_t ticket, std::span<const GrantRequestItem> items, bool may_block) {
  auto refuse = [this](Status st) {
    refused_other_.fetch_add(1);
    return st;
  };
  if (options_.admitting && !options_.admitting()) {
    return refuse(
        Status(Code::kUnavailable, "this manager is not admitting remote reads (fenced)"));
  }
  if (options_.members != nullptr) {
    if (Status st = options_.members->Check(node, uuid); !st.ok()) return refuse(st);
  }
  if (const std::string self = runtime_id_.Get(); expect_owner_uuid != self) {
    return refuse(NotFound("this manager is runtime " + self + ", not " + expect_owner_uuid +
                           ": the index entry is stale"));
  }
  if (ticket == 0) return refuse(InvalidArgument("ticket 0 is not a ticket"));
  if (items.empty()) return refuse(InvalidArgument("nothing to authorize"));
  if (items.size() > options_.max_items) {
    return refuse(InvalidArgument("at most " + std::to_string(options_.max_items) +
                                  " items per authorization"));
  }
  for (const GrantRequestItem& it : items) {
    if (Status st = store_->rules().Ref({it.tenant, it.key}); !st.ok()) return refuse(st);
  }
  std::shared_ptr<Grant> grant;
  size_t held_before = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return refuse(Status(Code::kUnavailable, "this manager is stopping"));
    if (live_.count(ticket) != 0) {
      return refuse(InvalidArgument("ticket " + std::to_string(ticket) + " is already live"));
    }
    if (live_.size() >= options_.max_sessions) {
      refused_sessions_.fetch_add(1);
      return Status(Code::kNoSpace, "at most " + std::to_string(options_.max_sessions) +
                                        " grants may be live at once");
    }
    const auto held = open_by_requester_.find(uuid);
    if (held != open_by_requester_.end() && held->second >= options_.max_per_requester) {
      refused_sessions_.fetch_add(1);
      return Status(Code::kNoSpace, "requester " + uuid + " already holds " +
                                        std::to_string(held->second) + " grants here (at most " +
                                        std::to_string(options_.max_per_requester) + ")");
    }
    // Made only once it counts: a grant's end uncounts it from its requester.
    grant = std::make_shared<Grant>(this, uuid, ticket, next_pin_owner_.fetch_add(1));
    grant->items.resize(items.size());
    held_before = open_by_requester_[uuid]++;
    live_.emplace(ticket, grant);
  }
  std::vector<GrantAnswer> answers(items.size());
  bool budget_hit = PinItems(*grant, items, answers, false, may_block);
  const bool needs_disk = std::any_of(answers.begin(), answers.end(), [](const GrantAnswer& a) {
    return a.status.code() == Code::kRetry;
  });
  if (!may_block && (needs_disk || (budget_hit && held_before > 0))) {
    Withdraw(ticket, grant);  // its pins and charge go with it
    return Status(Code::kRetry, "deciding this authorization needs a wait");
  }
  if (budget_hit && held_before > 0) {
    // The requester's own grants still open are releases in progress: wait
    // for one of them (not for anyone else's READs), then try once more.
    budget_waits_.fetch_add(1);
    {
      std::unique_lock lock(mu_);
      ended_cv_.wait_for(lock, std::chrono::milliseconds(options_.budget_wait_ms), [&] {
        auto it = open_by_requester_.find(uuid);
        return stopping_ || it == open_by_requester_.end() || it->second <= held_before;
      });
    }
    budget_hit = PinItems(*grant, items, answers, true, true);
  }
  size_t granted = 0;
  for (const GrantAnswer& a : answers) {
    granted += a.status.ok() ? 1 : 0;
    if (a.status.code() == Code::kNoSpace) refused_budget_.fetch_add(1);
    if (a.status.code() == Code::kNotFound) refused_stale_.fetch_add(1);
  }
  std::shared_ptr<Grant> drop;
  {
    std::lock_guard lock(mu_);
    grant->ready = true;
    grant->deadline = clock_->NowNanos() + options_.grant_timeout_ms * 1'000'000;
    if (granted == 0) {  // nothing to read: no grant to keep
      auto it = live_.find(ticket);
      if (it != live_.end() && it->second == grant) {
        drop = std::move(it->second);
        live_.erase(it);
      }
    }
  }
  drop.reset();
  grant.reset();
  if (granted > 0) authorizations_.fetch_add(1);
  items_granted_.fetch_add(granted);
  (void)node;
  return answers;
}

void GrantTable::Withdraw(uint64_t ticket, const std::shared_ptr<Grant>& grant) {
  std::shared_ptr<Grant> drop;  // destroyed after the lock is gone
  std::lock_guard lock(mu_);
  auto it = live_.find(ticket);
  if (it != live_.end() && it->second == grant) {
    drop = std::move(it->second);
    live_.erase(it);
  }
}

bool GrantTable::Release(const std::string& uuid, uint64_t ticket) {
  std::shared_ptr<Grant> drop;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(ticket);
    if (it == live_.end() || it->second->uuid != uuid) return false;
    drop = std::move(it->second);
    live_.erase(it);
  }
  released_.fetch_add(1);
  return true;
}

size_t GrantTable::DropIf(const std::function<bool(const Grant&)>& pred) {
  std::vector<std::shared_ptr<Grant>> drop;  // destroyed after the lock is gone
  {
    std::lock_guard lock(mu_);
    for (auto it = live_.begin(); it != live_.end();) {
      if (pred(*it->second)) {
        drop.push_back(std::move(it->second));
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return drop.size();
}

size_t GrantTable::ReleaseDeparted(const std::set<std::string>& live) {
  const size_t n = DropIf([&](const Grant& g) { return live.count(g.uuid) == 0; });
  departed_.fetch_add(n);
  return n;
}

size_t GrantTable::ExpireDue() {
  const int64_t now = clock_->NowNanos();
  const size_t n = DropIf([&](const Grant& g) { return g.ready && g.deadline <= now; });
  expired_.fetch_add(n);
  return n;
}

Result<transfer::GrantSpan> GrantTable::Open(uint64_t ticket, uint32_t item, uint64_t generation) {
  std::lock_guard lock(mu_);
  auto it = live_.find(ticket);
  if (it == live_.end() || !it->second->ready) {
    return NotFound("no live grant " + std::to_string(ticket) + " (released or expired)");
  }
  const Grant& g = *it->second;
  if (item >= g.items.size() || !g.items[item].ok) {
    return NotFound("item " + std::to_string(item) + " is not granted under this ticket");
  }
  const PinGrant& pin = g.items[item].pin;
  if (generation != pin.generation) {
    return InvalidArgument("the grant holds generation " + std::to_string(pin.generation) +
                           ", not " + std::to_string(generation));
  }
  return transfer::GrantSpan{std::shared_ptr<const void>(it->second, pin.data), pin.data, pin.size,
                             pin.digests};
}

GrantStats GrantTable::Stats() const {
  GrantStats s;
  {
    std::lock_guard lock(mu_);
    s.sessions = live_.size();
  }
  s.reserved_bytes = reserved_.load();
  s.budget_bytes = options_.budget_bytes;
  s.authorizations = authorizations_.load();
  s.items_granted = items_granted_.load();
  s.refused_stale = refused_stale_.load();
  s.refused_budget = refused_budget_.load();
  s.refused_sessions = refused_sessions_.load();
  s.refused_other = refused_other_.load();
  s.budget_waits = budget_waits_.load();
  s.released = released_.load();
  s.expired = expired_.load();
  s.departed = departed_.load();
  return s;
}

}  // namespace tierkv
