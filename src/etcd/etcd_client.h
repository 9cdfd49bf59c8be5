// etcd::Client: the one etcd v3 client of a manager (KV, Lease, Election over
// gRPC; the streams are in lease_keeper.h and watcher.h).
//
// Endpoints: several may be given. Each call goes to the current endpoint; when
// it fails with UNAVAILABLE (member down, connection refused) or its per-attempt
// deadline passes, the client moves to the next endpoint and retries, each
// endpoint at most once per call. Every unary call carries a deadline
// (ClientOptions::call_timeout_ms, or the call's own). gRPC keepalive pings are
// sent no more often than every 5 s (etcd's minimum; faster pings get the
// connection closed with "too_many_pings").
//
// Errors (tierkv Status): UNAVAILABLE when no endpoint answered in time (the
// message names the last gRPC error), INVALID_ARGUMENT / TOO_LARGE when etcd
// refused the request itself (e.g. "request is too large"), INTERNAL for other
// gRPC errors. Failed calls are counted by kind (Stats()).
//
// The generated protobuf types stay inside src/etcd/*.cc: this header speaks in
// plain structs, so the rest of the manager does not compile gRPC headers.
//
// Thread-safety: every method is thread-safe; calls may run concurrently.
#ifndef TIERKV_ETCD_ETCD_CLIENT_H_
#define TIERKV_ETCD_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tierkv/status.h"

namespace tierkv::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision when the range was read
  std::vector<KeyValue> kvs;
};

// One condition of a transaction (etcd's Compare). `number` is the version,
// create or mod revision, or lease; `value` is used with kValue.
struct Compare {
  enum Target : uint8_t { kVersion, kCreate, kMod, kValue, kLease };
  enum Result : uint8_t { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = kVersion;
  Result result = kEqual;
  int64_t number = 0;
  std::string value;
};

// One operation of a transaction.
struct Op {
  enum Kind : uint8_t { kPut, kDelete, kGet };
  Kind kind = kGet;
  std::string key;
  std::string value;    // kPut
  int64_t lease = 0;    // kPut
  bool prefix = false;  // kDelete and kGet: every key starting with `key`
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;
  std::vector<RangeResult> gets;  // one per kGet op of the branch taken, in order
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_secs = 0;  // what etcd granted (it may raise a small request)
};

// Who is elected (etcd's LeaderKey).
struct LeaderKey {
  std::string name;
  std::string key;
  int64_t rev = 0;
  int64_t lease = 0;
};

struct ClientOptions {
  std::vector<std::string> endpoints;  // host:port or http://host:port
  int64_t call_timeout_ms = 3000;      // per attempt of a unary call
  int64_t keepalive_ms = 10000;        // gRPC pings; raised to 5000 if lower
};

// Failed calls by kind, for /metrics.
struct ClientStats {
  uint64_t unavailable = 0;  // no endpoint answered (after failover)
  uint64_t timeout = 0;      // attempts that ran out of time
  uint64_t refused = 0;      // etcd answered with an error about the request
  uint64_t failovers = 0;    // moves to another endpoint
};

class Client {
 public:
  // Parses the endpoints and creates one channel per endpoint (connections are
  // made lazily). Errors: INVALID_ARGUMENT for an empty list or a bad endpoint.
  static Result<std::unique_ptr<Client>> Create(const ClientOptions& options);
  virtual ~Client();

  virtual Result<RangeResult> Get(const std::string& key, bool prefix = false);
  // Returns the revision of the write.
  virtual Result<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Returns how many keys were deleted.
  virtual Result<int64_t> Delete(const std::string& key, bool prefix = false);
  virtual Result<TxnResult> Txn(const std::vector<Compare>& compares,
                                const std::vector<Op>& success, const std::vector<Op>& failure);
  virtual Status Compact(int64_t revision);

  virtual Result<LeaseGrant> GrantLease(int64_t ttl_secs);
  virtual Status RevokeLease(int64_t id);

  // Blocks until this lease's candidate is elected under `name`, the deadline
  // passes (UNAVAILABLE; campaign again) or Cancel() is called. A campaign
  // retried with the same lease keeps its place.
  virtual Result<LeaderKey> Campaign(const std::string& name, int64_t lease,
                                     const std::string& value, int64_t timeout_ms);
  virtual Status Resign(const LeaderKey& leader);
  // The current leader's key and value, or nullopt when nobody is elected.
  virtual Result<std::optional<KeyValue>> Leader(const std::string& name);

  // Makes every call in progress and every later one fail at once (shutdown).
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  ClientStats Stats() const;
  const std::vector<std::string>& endpoints() const;

  // For the stream owners (lease_keeper.cc, watcher.cc): the channel to use
  // now (an opaque grpc::Channel), and a report that it failed.
  struct Channel;
  std::shared_ptr<Channel> CurrentChannel() const;
  void ReportFailure(const Channel& failed);
  int64_t keepalive_ms() const;

  struct Impl;  // opaque: the channels and counters (etcd_client.cc)

 protected:
  Client() = default;  // for test doubles

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> cancelled_{false};
};

// The key just past every key that starts with `prefix` (etcd's range_end).
std::string PrefixEnd(const std::string& prefix);

}  // namespace tierkv::etcd

#endif  // TIERKV_ETCD_ETCD_CLIENT_H_
