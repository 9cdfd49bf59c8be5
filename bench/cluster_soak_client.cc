// The cluster soak's client threads (cluster_soak.h).
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string_view>

#include "bench_util.h"
#include "cluster_soak.h"
#include "tierkv/client.h"

namespace tierkv::cluster_soak {
namespace {

constexpr int kMutableKeys = 16;
constexpr size_t kLiveImmutable = 100;  // older objects are removed everywhere
constexpr size_t kBufferBytes = (2u << 20) + 4096;

size_t SizeOf(const std::string& key, uint64_t version) {
  const uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), version * 31 + 7);
  if ((h >> 40) % 16 == 0) return (1u << 20) + h % (1u << 20);
  return 4096 + h % (192u << 10);
}

// Connections of one client thread to every manager, each made in the
// member's current epoch, and the judgement of each call's outcome.
class Sessions {
 public:
  Sessions(Shared* shared, int id) : shared_(shared), id_(id), conns_(shared->members.size()) {}

  int size() const { return static_cast<int>(conns_.size()); }

  // A client of member `m` connected in its current epoch (*epoch), or null
  // while it is down.
  Client* Of(int m, uint64_t* epoch) {
    auto [uds, now] = shared_->members[m]->Address();
    *epoch = now;
    Conn& c = conns_[m];
    if (c.client && c.epoch == now) return c.client.get();
    c.client.reset();
    if (uds.empty()) return nullptr;
    ClientOptions options;
    options.client_name = "cluster-soak-" + std::to_string(id_);
    options.prefault_pool = false;
    options.io_timeout_ms = 20000;
    auto r = Client::Connect(uds, options);
    if (!r.ok()) {
      Judge(m, now, r.status(), "connect", {});
      return nullptr;
    }
    c.client = std::move(*r);
    c.epoch = now;
    return c.client.get();
  }

  // False when `st` is a failure: one caused by member `m`'s restart (it was
  // called in `epoch`) counts as `down`, anything not in `allowed` (OK always
  // is) as unexpected.
  bool Judge(int m, uint64_t epoch, const Status& st, const std::string& what,
             std::initializer_list<Code> allowed) {
    Tally& t = shared_->tally;
    if (st.ok()) return true;
    for (Code c : allowed) {
      if (st.code() != c) continue;
      if (c == Code::kNotFound) ++t.misses;
      if (c == Code::kNoSpace) ++t.no_space;
      if (c == Code::kUnavailable) ++t.unavailable_lookups;
      if (c == Code::kRetry) ++t.retries;
      return false;
    }
    Member& mem = *shared_->members[m];
    if (mem.epoch.load() != epoch || !mem.up.load()) {
      ++t.down;
      conns_[m].client.reset();
      return false;
    }
    t.Fail(&t.unexpected, what + " on " + mem.id + ": " + st.ToString());
    return false;
  }

 private:
  struct Conn {
    std::unique_ptr<Client> client;
    uint64_t epoch = 0;
  };
  Shared* shared_;
  int id_;
  std::vector<Conn> conns_;
};

}  // namespace

std::string ValueOf(const std::string& key, uint64_t version) {
  std::string v(SizeOf(key, version), '\0');
  std::memcpy(v.data(), &version, sizeof(version));
  uint64_t x = XXH3_64bits_withSeed(key.data(), key.size(), version) | 1;
  for (size_t i = sizeof(version); i < v.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, v.size() - i));
  }
  return v;
}

uint64_t VersionIn(const std::string& key, const std::string& bytes, uint64_t newest) {
  uint64_t version = 0;
  if (bytes.size() < sizeof(version)) return 0;
  std::memcpy(&version, bytes.data(), sizeof(version));
  if (version == 0 || version > newest) return 0;
  return bytes == ValueOf(key, version) ? version : 0;
}

void ClientLoop(int id, Shared* shared, double deadline, ClientState* state) {
  Tally& t = shared->tally;
  Sessions s(shared, id);
  const int home = id % s.size();
  std::mt19937_64 rng(id * 7919 + 17);
  const std::string prefix = "c" + std::to_string(id) + "/";
  const std::string& tenant = state->tenant;
  std::vector<uint64_t> attempts(kMutableKeys, 0), acked(kMutableKeys, 0);
  std::vector<std::string> order;  // immutable keys, oldest first
  uint64_t next_key = 0;
  std::string buf(kBufferBytes, '\0');

  auto mutable_key = [&](int j) { return prefix + "m" + std::to_string(j); };
  auto random_live = [&]() -> const std::string& { return order[rng() % order.size()]; };
  auto check_immutable = [&](const std::string& key, const std::string& bytes, int m) {
    if (VersionIn(key, bytes, 1) != 1) {
      t.Fail(&t.corrupt, "wrong bytes for " + key + " from " + shared->members[m]->id);
    }
  };
  auto remove_everywhere = [&](const std::string& key) {
    for (int m = 0; m < s.size(); ++m) {
      uint64_t epoch = 0;
      if (Client* c = s.Of(m, &epoch)) {
        const Status st = c->Remove(key, tenant);
        if (st.code() == Code::kNotFound) {
          ++t.remove_absent;
          continue;
        }
        s.Judge(m, epoch, st, "remove", {});
      }
    }
  };

  while (bench::NowSeconds() < deadline) {
    const int op = static_cast<int>(rng() % 10);
    const int any = static_cast<int>(rng() % s.size());
    uint64_t epoch = 0;
    ++t.ops;
    if (op <= 2 || order.empty()) {  // a new immutable object on the home manager
      Client* c = s.Of(home, &epoch);
      if (c == nullptr) continue;
      const std::string key = prefix + "i" + std::to_string(next_key++);
      const uint64_t kills = shared->kills.load();
      const std::string v = ValueOf(key, 1);
      if (s.Judge(home, epoch, c->Put(key, v, {tenant, {}}), "put", {Code::kNoSpace})) {
        state->immutable[key] = {home, kills};
        order.push_back(key);
      }
      if (order.size() > kLiveImmutable) {
        remove_everywhere(order.front());
        state->immutable.erase(order.front());
        order.erase(order.begin());
      }
    } else if (op == 3) {  // a new version of a mutable object on the home manager
      Client* c = s.Of(home, &epoch);
      if (c == nullptr) continue;
      const int j = static_cast<int>(rng() % kMutableKeys);
      const uint64_t version = ++attempts[j];
      const std::string v = ValueOf(mutable_key(j), version);
      // RETRY: a fetch or a drain's copy of the key is being stored here.
      if (s.Judge(home, epoch, c->Upsert(mutable_key(j), v, {tenant, {}}), "upsert",
                  {Code::kNoSpace, Code::kRetry})) {
        acked[j] = version;
      }
    } else if (op <= 5) {  // read an immutable object anywhere
      Client* c = s.Of(any, &epoch);
      if (c == nullptr) continue;
      const std::string& key = random_live();
      auto r = c->Get(key, buf.data(), buf.size(), tenant);
      if (s.Judge(any, epoch, r.status(), "get", {Code::kNotFound})) {
        check_immutable(key, buf.substr(0, *r), any);
      }
    } else if (op == 6) {  // read a mutable object anywhere: any version written, whole
      Client* c = s.Of(any, &epoch);
      if (c == nullptr) continue;
      const int j = static_cast<int>(rng() % kMutableKeys);
      auto r = c->Get(mutable_key(j), buf.data(), buf.size(), tenant);
      if (s.Judge(any, epoch, r.status(), "get mutable", {Code::kNotFound})) {
        const uint64_t version = VersionIn(mutable_key(j), buf.substr(0, *r), attempts[j]);
        if (version == 0) {
          t.Fail(&t.corrupt,
                 "wrong bytes for " + mutable_key(j) + " from " + shared->members[any]->id);
        } else if (version < acked[j]) {
          ++t.stale_mutable;
        }
      }
    } else if (op <= 8) {  // a batch of immutable objects anywhere
      Client* c = s.Of(any, &epoch);
      if (c == nullptr) continue;
      std::vector<std::string_view> keys;
      for (int i = 0; i < 8; ++i) keys.push_back(random_live());
      auto got = c->BatchGet(keys, tenant);
      for (size_t i = 0; i < got.size(); ++i) {
        if (s.Judge(any, epoch, got[i].status(), "batch get", {Code::kNotFound})) {
          check_immutable(std::string(keys[i]), *got[i], any);
        }
      }
    } else {  // lookups anywhere: OK, proved absent, or unknown
      Client* c = s.Of(any, &epoch);
      if (c == nullptr) continue;
      std::vector<std::string_view> keys = {random_live(), random_live()};
      const std::string never = prefix + "never";
      keys.push_back(never);
      const auto found = c->BatchExist(keys, tenant);
      for (const Status& st : found) {
        s.Judge(any, epoch, st, "batch exist", {Code::kNotFound, Code::kUnavailable});
      }
      if (found.size() == 3 && found[2].ok()) {
        t.Fail(&t.unexpected, "a key never put exists on " + shared->members[any]->id);
      }
      auto q = c->Query(keys[0], tenant);
      if (s.Judge(any, epoch, q.status(), "query", {Code::kNotFound, Code::kUnavailable}) &&
          !q->owner.empty()) {
        ++t.remote_candidates;
      }
    }
  }
}

}  // namespace tierkv::cluster_soak
