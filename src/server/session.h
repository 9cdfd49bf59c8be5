// Session: one client connection's request loop.
//
// Reads a frame, checks it against the limits before allocating anything,
// decodes it, runs it against the Store, and writes the reply. A body that does
// not decode gets a PROTOCOL_ERROR reply and the connection stays open (framing
// is intact); a header that cannot be trusted (bad magic or version, a length
// over the limit) gets a kFatal frame and the connection is closed. Nothing a
// client sends affects other sessions.
//
// The session remembers the write grants and read leases it was given; when the
// connection ends (for any reason) it aborts and releases them, so a client that
// vanishes mid-put or mid-get leaks nothing.
//
// The first request must be HELLO, answered before `handshake_deadline_ns`
// (CLOCK_MONOTONIC); otherwise the connection ends.
//
// Thread-safety: a Session is driven by one thread at a time (the worker that
// serves its connection now).
#ifndef TIERKV_SERVER_SESSION_H_
#define TIERKV_SERVER_SESSION_H_

#include <atomic>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "protocol/frame.h"
#include "protocol/socket_io.h"
#include "server/server.h"
#include "store/store.h"

namespace tierkv {

class Session {
 public:
  Session(Server* server, Store* store, int fd, bool unix_socket, uint64_t id,
          int64_t handshake_deadline_ns = INT64_MAX);
  ~Session();  // cleans up grants and leases

  // Serves requests while they come. Returns true when no request came for
  // `park_ms` (< 0: never) after the handshake: the connection is idle and may
  // be parked; false when it ended (peer closed, stream broken, read side shut
  // down, handshake deadline passed).
  bool Serve(int park_ms);
  // Serve until the connection ends.
  void Run();
  bool hello_done() const { return hello_done_; }
  // Whether the client holds pinned values (views into the pool): such a
  // connection is never closed to make room for another.
  bool holds_pins() const { return pins_.load(std::memory_order_relaxed) != 0; }

 private:
  // Handlers: decode `body`, execute, fill reply_ (body only); return the
  // top-level status (non-OK replaces the body with the error message).
  Status Dispatch(const proto::FrameHeader& h, std::string_view body);  // traced
  Status DispatchOp(const proto::FrameHeader& h, std::string_view body);
  Status Hello(std::string_view body);
  Status Alloc(std::string_view body);
  Status IdCall(proto::Opcode op, std::string_view body);
  Status Put(std::string_view body);
  // LEASE, or with ReadHold::kLocate LOCATE (no lease for a DRAM hit).
  Status Lease(std::string_view body, ReadHold hold);
  // PIN: a lease made open-ended, charged to this connection's pin budget.
  Status Pin(std::string_view body);
  // Appends a LEASE (or LOCATE) reply for `g` to reply_; remembers a lease.
  void EncodeGrant(const LeaseGrant& g, ReadHold hold);
  Status Get(std::string_view body);
  Status KeyCall(proto::Opcode op, std::string_view body);
  // A lookup `local` answered; when it missed and the call allows it, the
  // cluster catalog answers instead (found, absent, or unknown/out of scope
  // as UNAVAILABLE).
  Result<ObjectInfo> Lookup(std::string_view tenant, std::string_view key, uint8_t flags,
                            Result<ObjectInfo> local) const;
  static Status CheckLookupFlags(proto::Opcode op, uint8_t flags);
  Status RemoveAll(std::string_view body);
  Status ListKeys(std::string_view body);
  Status BatchAlloc(std::string_view body);
  Status BatchIds(proto::Opcode op, std::string_view body);
  Status BatchPut(std::string_view body);
  Status BatchKeys(proto::Opcode op, std::string_view body);

  // Put of inline bytes (TCP): alloc, copy, commit.
  Status PutInline(std::string_view tenant, std::string_view key, std::string_view group_id,
                   uint8_t flags, std::string_view value);
  // Get into reply_ (TCP): lease, copy, release. Writes the blob length + bytes.
  Status GetInline(std::string_view tenant, std::string_view key);
  // A lease of the local value; in cluster mode a local miss is fetched from
  // the owner the global index names (RemoteCatalog::Fetch), then leased; a
  // fetched copy dropped before it is leased is fetched again, kFetchRounds
  // times at most.
  static constexpr int kFetchRounds = 3;
  Result<LeaseGrant> LeaseOrFetch(std::string_view tenant, std::string_view key,
                                  ReadHold hold = ReadHold::kLease);
  // The same for a batch: the items that missed are fetched together.
  std::vector<Result<LeaseGrant>> BatchLeaseOrFetch(std::string_view tenant,
                                                    std::span<const std::string_view> keys,
                                                    ReadHold hold = ReadHold::kLease);

  // Waits up to `ms` (< 0: forever) for the next request; false when none came
  // or the server needs this worker for a waiting connection.
  bool WaitForRequest(int ms);
  // For a client whose next request is due in about `gap_us`, longer than
  // `spin_us` (a client copying a large value between a lease and its
  // release, say): sleeps until spin_us / 2 before it is due, then polls for
  // up to spin_us, so the request finds the thread awake (a wake-up costs
  // tens of microseconds on a virtual machine). How it came (kSlept: before
  // the sleep ended, or the socket ended); nullopt leaves the ordinary wait
  // to follow.
  std::optional<RequestWait> AwaitPaced(int gap_us, int spin_us);
  Status SendReply(const proto::FrameHeader& request, const Status& status);
  void SendFatal(const Status& status);
  Status RequireShm(std::string_view op) const;

  Server* const server_;
  Store* const store_;
  const int fd_;
  const bool unix_socket_;
  const int64_t handshake_deadline_ns_;
  bool hello_done_ = false;
  bool send_generations_ = false;  // the last HELLO asked for the generation table
  std::string name_space_;         // declared at HELLO; caller_.name_space views it
  Caller caller_;
  proto::BufferedReader reader_;  // every read of fd_ goes through it
  std::string body_;              // request body buffer, reused
  std::string reply_;             // reply frame buffer, reused
  size_t reply_body_start_ = 0;
  proto::WaitAverage gap_{0};     // the wait for the next request, for adaptive spinning
  proto::WaitsByKind gap_after_;  // the same, per kind of the request before it
  uint16_t last_opcode_ = 0;      // the kind of the request answered last
  std::unordered_set<uint64_t> allocs_;
  std::unordered_set<uint64_t> leases_;
  std::atomic<uint64_t> pins_{0};  // PINs held (the store releases them all at the end)
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_SESSION_H_
