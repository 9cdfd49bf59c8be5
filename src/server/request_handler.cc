#include "server/request_handler.h"

#include <cstring>
#include <string>

#include "common/tracer.h"
#include "protocol/messages.h"
#include "server/server.h"

namespace tierkv {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

RequestHandler::RequestHandler(const HandlerContext& ctx, bool shm, uint64_t session_id)
    : ctx_(ctx), shm_(shm) {
  if (shm && ctx.registered != nullptr && ctx.registered->limits().total_bytes > 0) {
    regions_ = std::make_unique<SessionRegions>(ctx.registered);
  }
  caller_.session = session_id;
  caller_.rank = 0;
}

RequestHandler::~RequestHandler() {
  Store* store = ctx_.store;
  for (uint64_t id : allocs_) (void)store->Abort(caller_, id);
  for (uint64_t id : leases_) (void)store->Release(caller_, id);
  if (pins_.load(std::memory_order_relaxed) != 0) store->pins().ReleaseAll(caller_.session);
  store->EndSession(caller_.session);
  ctx_.client_metrics->EndSession(caller_.session);
}

namespace {

// The latency tracepoint of a request kind (protocol/opcodes.h).
Tracepoint* TracepointFor(uint16_t opcode) {
  switch (static_cast<Opcode>(opcode)) {
#define TIERKV_TRACEPOINT_OF(name, value, wire, tracepoint)            \
  case Opcode::name: {                                                 \
    static Tracepoint* const point = Tracer::Global().Get(tracepoint); \
    return point;                                                      \
  }
    TIERKV_OPCODES(TIERKV_TRACEPOINT_OF)
#undef TIERKV_TRACEPOINT_OF
    case Opcode::kFatal:
      break;
  }
  return nullptr;
}

}  // namespace

Status RequestHandler::Handle(const proto::FrameHeader& h, std::string_view body,
                              std::string* reply) {
  if (h.flags & proto::kFlagResponse) {
    return Status(Code::kProtocolError, "a response frame was sent to the manager");
  }
  reply_ = reply;
  Tracepoint* tp = TracepointFor(h.opcode);
  if (tp == nullptr) return Dispatch(h.opcode, body);
  TraceScope scope(tp);
  Status st = Dispatch(h.opcode, body);
  scope.End(st.ok() || st.code() == Code::kNotFound);
  return st;
}

Status RequestHandler::Dispatch(uint16_t opcode, std::string_view body) {
  switch (static_cast<Opcode>(opcode)) {
#define TIERKV_DISPATCH(name, value, wire, tracepoint) \
  case Opcode::name:                                   \
    return On<Opcode::name>(body);
    TIERKV_OPCODES(TIERKV_DISPATCH)
#undef TIERKV_DISPATCH
    case Opcode::kFatal:
      break;
  }
  return Status(Code::kNotSupported, "unknown opcode " + std::to_string(opcode));
}

Status RequestHandler::RequireShm(std::string_view op) const {
  if (shm_) return Status::Ok();
  return Status(Code::kNotSupported, std::string(op) +
                                         " needs the shared-memory pool, which only Unix-socket "
                                         "clients map; over TCP use put/get with inline bytes");
}

Status RequestHandler::CheckLookupFlags(Opcode op, uint8_t flags) {
  if (flags == 0) return Status::Ok();
  const bool lookup = op == Opcode::kExist || op == Opcode::kQuery || op == Opcode::kBatchExist ||
                      op == Opcode::kBatchQuery;
  const bool lease = op == Opcode::kLease || op == Opcode::kBatchLease;
  if (lease) {
    if ((flags & ~proto::kLookupHbm) != 0) {
      return InvalidArgument("lease requests take only the hbm lookup flag, not bits " +
                             std::to_string(flags));
    }
    return Status::Ok();
  }
  if (!lookup) {
    return InvalidArgument("lookup flags are only for exist, query and lease requests");
  }
  if ((flags & ~proto::kLookupLocalOnly) != 0) {
    return InvalidArgument("unknown lookup flag bits " + std::to_string(flags));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// The handshake and the write path.

template <>
Status RequestHandler::On<Opcode::kHello>(std::string_view body) {
  Reader r(body);
  proto::HelloRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  if (!ValidNamespace(req.name_space)) {
    return InvalidArgument("namespace '" + std::string(req.name_space.substr(0, 100)) +
                           "' is malformed: expected tierkv:v1: and 64 lowercase hex digits");
  }
  if ((req.flags & ~(proto::kHelloGenerations | proto::kHelloHbm)) != 0) {
    return InvalidArgument("unknown hello flag bits " + std::to_string(req.flags));
  }
  send_generations_ = shm_ && (req.flags & proto::kHelloGenerations) != 0;
  hbm_session_ = shm_ && (req.flags & proto::kHelloHbm) != 0 && ctx_.store->hbm() != nullptr;
  name_space_ = std::string(req.name_space);
  caller_.name_space = name_space_;
  caller_.rank = req.rank;
  hello_done_ = true;
  const Store& store = *ctx_.store;
  const ServerOptions& opt = *ctx_.options;
  proto::HelloReply rep;
  rep.server_rank = opt.rank;
  rep.pool_size = store.pool().capacity();
  rep.shm = shm_ ? 1 : 0;
  rep.max_key_bytes = store.options().max_key_bytes;
  rep.max_object_bytes = store.options().max_object_bytes;
  rep.max_frame_bytes = opt.max_frame_bytes;
  rep.max_batch = opt.max_batch;
  rep.lease_ms = static_cast<uint32_t>(store.options().lease_ms);
  rep.session_id = caller_.session;
  rep.has_generations_fields = (req.flags & proto::kHelloGenerations) != 0;
  rep.generations = send_generations_ ? 1 : 0;
  rep.generation_page_bytes = send_generations_ ? DramPool::kGenerationPageBytes : 0;
  rep.has_hbm_fields = (req.flags & proto::kHelloHbm) != 0;
  if (hbm_session_) {
    const HbmTier& tier = *ctx_.store->hbm();
    const uint8_t backend = tier.backend() == "host" ? 1 : 0;
    for (const auto& pool : tier.pools()) {
      rep.hbm_pools.push_back(
          {pool->device().ordinal(), pool->capacity(), backend, pool->handle().bytes});
    }
  }
  Writer w(reply_);
  rep.Encode(w);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kAlloc>(std::string_view body) {
  if (Status st = RequireShm("alloc"); !st.ok()) return st;
  Reader r(body);
  proto::AllocRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  PutOptions po{req.group_id, (req.flags & proto::kPutUpsert) != 0};
  const bool placement = (req.flags & proto::kPutHbm) != 0;
  if (placement && hbm_session_) po.medium = Medium::kHbm;
  Result<AllocGrant> g = ctx_.store->Alloc(caller_, {req.tenant, req.key}, req.size, po);
  if (!g.ok()) return g.status();
  EncodeAlloc(*g, placement);
  return Status::Ok();
}

void RequestHandler::EncodeAlloc(const AllocGrant& g, bool placement) {
  allocs_.insert(g.alloc_id);
  Writer w(reply_);
  proto::EncodeAllocReply(w, {g.alloc_id, g.offset});
  if (placement) proto::EncodePlacement(w, g.medium, g.pool);
}

Status RequestHandler::IdCall(Opcode op, std::string_view body) {
  Reader r(body);
  proto::IdRequest req;
  if (Status st = req.Decode(r, proto::OpcodeName(static_cast<uint16_t>(op))); !st.ok()) {
    return st;
  }
  Store* store = ctx_.store;
  switch (op) {
    case Opcode::kCommit:
      allocs_.erase(req.id);
      return store->Commit(caller_, req.id);
    case Opcode::kAbort:
      allocs_.erase(req.id);
      return store->Abort(caller_, req.id);
    case Opcode::kUnpin: {
      Status st = store->pins().Unpin(caller_.session, req.id);
      if (st.ok()) pins_.fetch_sub(1, std::memory_order_relaxed);
      return st;
    }
    default:
      leases_.erase(req.id);
      return store->Release(caller_, req.id);
  }
}

template <>
Status RequestHandler::On<Opcode::kCommit>(std::string_view body) {
  return IdCall(Opcode::kCommit, body);
}

template <>
Status RequestHandler::On<Opcode::kAbort>(std::string_view body) {
  return IdCall(Opcode::kAbort, body);
}

template <>
Status RequestHandler::On<Opcode::kRelease>(std::string_view body) {
  return IdCall(Opcode::kRelease, body);
}

template <>
Status RequestHandler::On<Opcode::kUnpin>(std::string_view body) {
  return IdCall(Opcode::kUnpin, body);
}

Status RequestHandler::PutInline(std::string_view tenant, std::string_view key,
                                 std::string_view group_id, uint8_t flags, std::string_view value) {
  PutOptions po{group_id, (flags & proto::kPutUpsert) != 0};
  Result<AllocGrant> g = ctx_.store->Alloc(caller_, {tenant, key}, value.size(), po);
  if (!g.ok()) return g.status();
  std::memcpy(g->data, value.data(), value.size());
  return ctx_.store->Commit(caller_, g->alloc_id);
}

template <>
Status RequestHandler::On<Opcode::kPut>(std::string_view body) {
  Reader r(body);
  proto::PutRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  return PutInline(req.tenant, req.key, req.group_id, req.flags, req.value);
}

// ---------------------------------------------------------------------------
// Single reads and lookups.

void RequestHandler::EncodeGrant(const LeaseGrant& g, ReadHold hold, bool placement) {
  if (g.lease_id != 0) leases_.insert(g.lease_id);
  Writer w(reply_);
  const proto::LeaseReply l{g.lease_id, g.offset, g.size, g.deadline_nanos, g.generation};
  if (hold == ReadHold::kLocate) {
    proto::EncodeLocateReply(w, l);
  } else {
    proto::EncodeLeaseReply(w, l);
  }
  if (placement) proto::EncodePlacement(w, g.medium, g.pool);
}

ReadHold RequestHandler::HoldFor(Opcode op, uint8_t lookup_flags) const {
  if (op == Opcode::kLocate || op == Opcode::kBatchLocate) return ReadHold::kLocate;
  const bool device = (lookup_flags & proto::kLookupHbm) != 0 && hbm_session_;
  return device ? ReadHold::kLeaseDevice : ReadHold::kLease;
}

Status RequestHandler::Lease(std::string_view body, Opcode op) {
  if (Status st = RequireShm(op == Opcode::kLocate ? "locate" : "lease"); !st.ok()) return st;
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  if (Status st = CheckLookupFlags(op, req.lookup_flags); !st.ok()) return st;
  const ReadHold hold = HoldFor(op, req.lookup_flags);
  Result<LeaseGrant> g = LeaseOrFetch(req.tenant, req.key, hold);
  if (!g.ok()) return g.status();
  EncodeGrant(*g, hold, (req.lookup_flags & proto::kLookupHbm) != 0);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kLease>(std::string_view body) {
  return Lease(body, Opcode::kLease);
}

template <>
Status RequestHandler::On<Opcode::kLocate>(std::string_view body) {
  return Lease(body, Opcode::kLocate);
}

template <>
Status RequestHandler::On<Opcode::kPin>(std::string_view body) {
  if (Status st = RequireShm("pin"); !st.ok()) return st;
  const uint64_t budget = ctx_.options->max_pinned_bytes;
  if (budget == 0) return Status(Code::kNotSupported, "this manager takes no pins");
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  // The lease makes this a get (hits, fetched from its owner in cluster mode)
  // and keeps the value in DRAM until the pin holds it.
  Result<LeaseGrant> g = LeaseOrFetch(req.tenant, req.key, ReadHold::kLease);
  if (!g.ok()) return g.status();
  Store* store = ctx_.store;
  Result<PinGrant> p = store->pins().Pin(caller_.session, {req.tenant, req.key}, 0, budget,
                                         /*may_rewarm=*/false);
  (void)store->Release(caller_, g->lease_id);
  if (!p.ok()) return p.status();
  pins_.fetch_add(1, std::memory_order_relaxed);
  Writer w(reply_);
  proto::EncodeLeaseReply(
      w, {p->pin_id, static_cast<uint64_t>(p->data - store->pool().base()), p->size, 0, 0});
  return Status::Ok();
}

Status RequestHandler::GetInline(std::string_view tenant, std::string_view key) {
  Result<LeaseGrant> g = LeaseOrFetch(tenant, key);
  if (!g.ok()) return g.status();
  const size_t mark = reply_->size();
  Writer w(reply_);
  std::memcpy(w.BlobSpace(g->size), g->data, g->size);
  Status st = ctx_.store->Release(caller_, g->lease_id);
  if (!st.ok()) reply_->resize(mark);  // never hand out bytes that may have been reused
  return st;
}

template <>
Status RequestHandler::On<Opcode::kGet>(std::string_view body) {
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  return GetInline(req.tenant, req.key);
}

Status RequestHandler::KeyCall(Opcode op, std::string_view body) {
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  if (Status st = CheckLookupFlags(op, req.lookup_flags); !st.ok()) return st;
  Store* store = ctx_.store;
  const ObjectRef ref{req.tenant, req.key};
  if (op == Opcode::kRemove) return store->Remove(caller_, ref);
  if (op == Opcode::kExist) {
    Status local = store->Exist(caller_, ref);
    if (local.code() != Code::kNotFound) return local;
    return Lookup(req.tenant, req.key, req.lookup_flags, local).status();
  }
  Result<ObjectInfo> info =
      Lookup(req.tenant, req.key, req.lookup_flags, store->Query(caller_, ref));
  if (!info.ok()) return info.status();
  Writer w(reply_);
  proto::EncodeObjectInfo(w, *info);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kExist>(std::string_view body) {
  return KeyCall(Opcode::kExist, body);
}

template <>
Status RequestHandler::On<Opcode::kQuery>(std::string_view body) {
  return KeyCall(Opcode::kQuery, body);
}

template <>
Status RequestHandler::On<Opcode::kRemove>(std::string_view body) {
  return KeyCall(Opcode::kRemove, body);
}

// ---------------------------------------------------------------------------
// Tenant-wide calls and the client's own figures.

template <>
Status RequestHandler::On<Opcode::kRemoveAll>(std::string_view body) {
  Reader r(body);
  proto::RemoveAllRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  Result<RemoveAllResult> res = ctx_.store->RemoveAll(caller_, req.tenant, req.force != 0);
  if (!res.ok()) return res.status();
  Writer w(reply_);
  proto::RemoveAllReply{res->removed, res->skipped, static_cast<uint8_t>(res->cleared ? 1 : 0)}
      .Encode(w);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kListKeys>(std::string_view body) {
  Reader r(body);
  proto::ListKeysRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  Result<std::vector<std::string>> keys =
      ctx_.store->ListKeys(caller_, req.tenant, req.prefix, req.limit);
  if (!keys.ok()) return keys.status();
  // Keep the reply within the frame limit; the truncated flag tells the client.
  const size_t budget = ctx_.options->max_frame_bytes;
  proto::ListKeysReply rep;
  size_t bytes = 0;
  for (const std::string& k : *keys) {
    bytes += 4 + k.size();
    if (bytes > budget) break;
    rep.keys.push_back(k);
  }
  rep.truncated = rep.keys.size() < keys->size() ? 1 : 0;
  Writer w(reply_);
  rep.Encode(w);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kReportMetrics>(std::string_view body) {
  Reader r(body);
  proto::ReportMetricsRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  return ctx_.client_metrics->Report(caller_.session, req, ctx_.store->clock()->NowUnixMillis());
}

}  // namespace tierkv
