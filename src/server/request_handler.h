// RequestHandler: one connection's requests, a frame in and a reply body out,
// with no socket. The Session around it reads frames, paces its waits and
// writes the replies (and the pool's descriptors with the HELLO reply).
//
// It decodes a request body, runs it against the Store (and, in cluster mode,
// the RemoteCatalog for what misses locally), and appends the reply body.
// Errors are the top-level status of the reply (the Session writes its
// message as the body); bad input never changes anything stored.
//
// It remembers the write grants, read leases and pins its connection was
// given; the destructor aborts and releases them, so a client that vanishes
// mid-put or mid-get leaks nothing.
//
// Dispatch is generated from protocol/opcodes.h: each request kind has an
// On<opcode> specialization, and one missing fails to link.
//
// Thread-safety: one thread at a time calls Handle (the worker serving the
// connection now); holds_pins() may be read from any thread.
#ifndef TIERKV_SERVER_REQUEST_HANDLER_H_
#define TIERKV_SERVER_REQUEST_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "protocol/codec.h"
#include "protocol/frame.h"
#include "server/client_metrics.h"
#include "server/registered_memory.h"
#include "server/remote_catalog.h"
#include "store/store.h"

namespace tierkv {
namespace proto {
class FdQueue;
}  // namespace proto

struct ServerOptions;

// What a handler works with. Not owned; everything outlives the handler.
struct HandlerContext {
  const ServerOptions* options = nullptr;
  Store* store = nullptr;
  ClientMetrics* client_metrics = nullptr;
  const RemoteCatalog* catalog = nullptr;  // cluster mode; null: local only
  RegisteredMemory* registered = nullptr;  // null: REGISTER refused
};

class RequestHandler {
 public:
  // `shm`: the connection maps the pool (Unix socket), so the shared-memory
  // calls (alloc, lease, locate, pin and their batches) are allowed.
  RequestHandler(const HandlerContext& ctx, bool shm, uint64_t session_id);
  ~RequestHandler();
  RequestHandler(const RequestHandler&) = delete;
  RequestHandler& operator=(const RequestHandler&) = delete;

  // Runs one request. Appends its reply body to `*reply` when it returns OK;
  // on an error the caller answers the status and its message, and whatever
  // was appended is to be dropped. Each kind is timed under its tracepoint.
  Status Handle(const proto::FrameHeader& h, std::string_view body, std::string* reply);

  // Where the descriptors passed with the connection's bytes wait (a Unix
  // socket; not owned, outlives the handler): REGISTER takes its region's.
  void SetFdQueue(proto::FdQueue* fds) { fds_ = fds; }

  bool hello_done() const { return hello_done_; }
  // After a successful HELLO over a Unix socket: whether the client asked
  // for the generation table (its descriptor goes with the reply).
  bool send_generations() const { return send_generations_; }
  bool hbm_session() const { return hbm_session_; }
  // Whether the client holds pinned values (views into the pool).
  bool holds_pins() const { return pins_.load(std::memory_order_relaxed) != 0; }

 private:
  static constexpr int kFetchRounds = 3;

  Status Dispatch(uint16_t opcode, std::string_view body);
  template <proto::Opcode op>
  Status On(std::string_view body);

  // Shared by several kinds.
  Status IdCall(proto::Opcode op, std::string_view body);
  Status Lease(std::string_view body, proto::Opcode op);
  // How a LEASE/LOCATE (or batch) with `lookup_flags` holds its values.
  ReadHold HoldFor(proto::Opcode op, uint8_t lookup_flags) const;
  Status KeyCall(proto::Opcode op, std::string_view body);
  Status BatchIds(proto::Opcode op, std::string_view body);
  Status BatchKeys(proto::Opcode op, std::string_view body);
  Status BatchGetInline(const proto::BatchKeysRequest& req, proto::Writer& w);
  Status PutInline(std::string_view tenant, std::string_view key, std::string_view group_id,
                   uint8_t flags, std::string_view value);
  Status GetInline(std::string_view tenant, std::string_view key);
  // Appends a grant (with its placement when `placement`: kLookupHbm asked).
  void EncodeGrant(const LeaseGrant& g, ReadHold hold, bool placement = false);
  Status RequireShm(std::string_view op) const;
  // RequireShm, and a manager that takes registered memory.
  Status RequireRegistration(std::string_view op) const;
  // BATCH_GET_INTO once its memory is resolved: items idx[j] (key keys[j],
  // memory dests[idx[j]]) are read from the store, and those it misses from
  // their owners (cluster mode), into out[idx[j]].
  void GetIntoLocal(std::string_view tenant, std::span<const std::string_view> keys,
                    std::span<const size_t> idx, std::span<const IntoDest> dests,
                    std::vector<Result<uint64_t>>& out);
  static Status CheckLookupFlags(proto::Opcode op, uint8_t flags);

  // The read path. A lease of the local value; in cluster mode a local miss
  // is fetched from the owner the global index names, then leased; a fetched
  // copy dropped before it is leased (its owner replaced it meanwhile,
  // cluster/copy_tracker.h) is fetched again, kFetchRounds times at most.
  Result<LeaseGrant> LeaseOrFetch(std::string_view tenant, std::string_view key,
                                  ReadHold hold = ReadHold::kLease);
  // The same for a batch: the items that missed are fetched together.
  std::vector<Result<LeaseGrant>> BatchLeaseOrFetch(std::string_view tenant,
                                                    std::span<const std::string_view> keys,
                                                    ReadHold hold = ReadHold::kLease);
  // A lookup `local` answered; when it missed and the call allows it, the
  // cluster catalog answers instead (found, absent, or unknown/out of scope
  // as UNAVAILABLE).
  Result<ObjectInfo> Lookup(std::string_view tenant, std::string_view key, uint8_t flags,
                            Result<ObjectInfo> local) const;

  const HandlerContext ctx_;
  const bool shm_;
  bool hello_done_ = false;
  bool send_generations_ = false;  // the last HELLO asked for the generation table
  // The last HELLO asked for the HBM pools (kHelloHbm) over the Unix socket:
  // allocs and leases may then be placed in HBM when asked.
  bool hbm_session_ = false;
  // Appends an alloc grant (with its placement when `placement`).
  void EncodeAlloc(const AllocGrant& g, bool placement);
  std::string name_space_;  // declared at HELLO; caller_.name_space views it
  Caller caller_;
  std::string* reply_ = nullptr;  // the reply of the request being handled
  std::unordered_set<uint64_t> allocs_;
  std::unordered_set<uint64_t> leases_;
  std::atomic<uint64_t> pins_{0};  // PINs held (the store releases them all at the end)
  proto::FdQueue* fds_ = nullptr;
  // This session's registered regions (null: the manager takes none); unmapped
  // when the session ends.
  std::unique_ptr<SessionRegions> regions_;
};

// One handler per request kind, defined in request_handler*.cc.
#define TIERKV_DECLARE_HANDLER(name, value, wire, tracepoint) \
  template <>                                                 \
  Status RequestHandler::On<proto::Opcode::name>(std::string_view body);
TIERKV_OPCODES(TIERKV_DECLARE_HANDLER)
#undef TIERKV_DECLARE_HANDLER

}  // namespace tierkv

#endif  // TIERKV_SERVER_REQUEST_HANDLER_H_
