// SingleFlight: at most one computation per key at a time; callers that ask
// for a key already in flight wait for that computation's result instead of
// starting their own. The store's rewarm (one SSD read per key) and the
// remote fetcher (one fetch per key from this manager) use it.
//
//   auto [ticket, leader] = flights.Join(key);
//   if (!leader) return ticket->Wait();
//   V v = Compute();
//   flights.Forget(key, ticket);  // new callers start afresh from here on
//   ticket->Finish(v);            // the followers get v
//
// Forget and Finish are apart so a leader can free the key under a lock of
// its own (where the result is installed) and wake the followers after it.
// Thread-safety: all members from any thread. Join and Forget take the
// table's mutex only; Wait blocks on the ticket's own.
#ifndef TIERKV_COMMON_SINGLE_FLIGHT_H_
#define TIERKV_COMMON_SINGLE_FLIGHT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace tierkv {

// One computation's result, for the callers that wait on it.
template <typename V>
class FlightTicket {
 public:
  // The result; wakes every waiter. Called once, by the leader.
  void Finish(V value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      value_ = std::move(value);
    }
    cv_.notify_all();
  }
  // Blocks until Finish; a copy of the result.
  V Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return value_.has_value(); });
    return *value_;
  }
  // As Wait, for at most `timeout`; nullopt when it passed first.
  template <typename Rep, typename Period>
  std::optional<V> WaitFor(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return value_.has_value(); })) return std::nullopt;
    return *value_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<V> value_;
};

template <typename K, typename V, typename Hash = std::hash<K>>
class SingleFlight {
 public:
  using Ticket = FlightTicket<V>;
  struct Joined {
    std::shared_ptr<Ticket> ticket;
    bool leader = false;  // this caller computes and finishes the ticket
  };

  // The flight of `key`: a new one led by this caller when none is under way.
  Joined Join(const K& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = flights_.try_emplace(key);
    if (fresh) it->second = std::make_shared<Ticket>();
    return {it->second, fresh};
  }
  // Frees `key` for a new flight, if `ticket` is still its flight.
  void Forget(const K& key, const std::shared_ptr<Ticket>& ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = flights_.find(key);
    if (it != flights_.end() && it->second == ticket) flights_.erase(it);
  }
  bool InFlight(const K& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return flights_.count(key) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<K, std::shared_ptr<Ticket>, Hash> flights_;
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_SINGLE_FLIGHT_H_
