#include "server/session.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "common/clock.h"
#include "common/tracer.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "protocol/socket_io.h"

namespace tierkv {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

Session::Session(Server* server, Store* store, int fd, bool unix_socket, uint64_t id,
                 int64_t handshake_deadline_ns)
    : server_(server),
      store_(store),
      fd_(fd),
      unix_socket_(unix_socket),
      handshake_deadline_ns_(handshake_deadline_ns) {
  caller_.session = id;
  caller_.rank = 0;
}

Session::~Session() {
  for (uint64_t id : allocs_) (void)store_->Abort(caller_, id);
  for (uint64_t id : leases_) (void)store_->Release(caller_, id);
  if (pins_.load(std::memory_order_relaxed) != 0) store_->ReleasePins(caller_.session);
  store_->EndSession(caller_.session);
  server_->client_metrics().EndSession(caller_.session);
}

namespace {

// Waits up to `ms` (< 0: forever) for `fd` to become readable (or to end).
bool WaitReadable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int rc = poll(&p, 1, ms);
    if (rc >= 0) return rc > 0;
    if (errno != EINTR) return true;  // let the read report the error
  }
}

}  // namespace

bool Session::WaitForRequest(int ms) {
  if (reader_.buffered() > 0) return true;  // the next request is already here
  // In slices, so that a connection waiting for a worker while all are busy
  // makes an idle one give its worker up at once.
  constexpr int kSliceMs = 5;
  for (int waited = 0; ms < 0 || waited < ms; waited += kSliceMs) {
    const int slice = ms < 0 ? kSliceMs : std::min(kSliceMs, ms - waited);
    if (WaitReadable(fd_, slice)) return true;
    if (hello_done_ && server_->Saturated()) return false;
  }
  return false;
}

std::optional<RequestWait> Session::AwaitPaced(int gap_us, int spin_us) {
  if (reader_.buffered() > 0) return RequestWait::kPolled;
  const int sleep_us = gap_us - spin_us / 2;
  const timespec ts{sleep_us / 1'000'000, static_cast<long>(sleep_us % 1'000'000) * 1000};
  pollfd p{fd_, POLLIN, 0};
  const int rc = ppoll(&p, 1, &ts, nullptr);
  if (rc > 0) return RequestWait::kSlept;  // came early (or an end the read reports)
  if (rc < 0) return std::nullopt;         // interrupted: the ordinary wait follows
  if (reader_.SpinFill(fd_, spin_us)) return RequestWait::kPaced;
  return std::nullopt;
}

void Session::Run() {
  while (Serve(-1)) {
  }
}

bool Session::Serve(int park_ms) {
  const ServerOptions& opt = server_->options();
  for (;;) {
    // Before HELLO every wait is bounded by the handshake deadline.
    int io_timeout = opt.io_timeout_ms;
    // The wait before parking follows the client's pace: about twice its usual
    // gap between requests, at least kMinParkWaitMs (a client that pauses for a
    // moment, to fault in its buffers say, keeps its worker) and at most
    // `park_ms`, so a session that goes quiet gives its worker back soon.
    constexpr int kMinParkWaitMs = 20;
    int wait_ms = park_ms < 0 ? park_ms
                              : std::clamp(2 * gap_.average_us() / 1000 + 1,
                                           std::min(kMinParkWaitMs, park_ms), park_ms);
    if (!hello_done_) {
      const int64_t left_ms = (handshake_deadline_ns_ - RealClock()->NowNanos()) / 1'000'000;
      if (left_ms <= 0) {
        server_->CountHandshakeTimeout();
        return false;
      }
      io_timeout = static_cast<int>(std::min<int64_t>(io_timeout, left_ms));
      wait_ms = wait_ms < 0 ? io_timeout : std::min(wait_ms, io_timeout);
    }
    // Adaptive spin: a client in a tight loop (its gaps between requests are
    // shorter than --spin-us) is polled for about twice its usual gap, at most
    // --spin-us (proto::WaitAverage); an idle one is not. The gap is learnt
    // per kind of the request just answered (the one after a LEASE comes once
    // the client has copied the value, the one after a RELEASE at once);
    // before a kind's first gap, the connection's overall pace counts. A
    // client whose gap after this kind is longer than --spin-us, by at most
    // kPacedGaps times and kPacedMaxUs, is awaited paced (AwaitPaced; not
    // before HELLO, whose wait the handshake deadline bounds). Then the wait
    // for the next request is a sleep of at most `wait_ms`; past it the
    // connection is parked (its worker goes back to the pool).
    constexpr int kPacedGaps = 8;
    constexpr int kPacedMaxUs = kMinParkWaitMs * 1000;
    const proto::WaitAverage& after = gap_after_.of(last_opcode_);
    const int spin = after.PollUs(opt.spin_us, gap_.PollUs(opt.spin_us));
    const bool paced = hello_done_ && spin == 0 && opt.spin_us > 0 &&
                       after.average_us() >= opt.spin_us &&
                       after.average_us() <= std::min(kPacedGaps * opt.spin_us, kPacedMaxUs);
    const auto wait_start = std::chrono::steady_clock::now();
    uint8_t hdr[proto::kHeaderSize];
    std::optional<RequestWait> how =
        paced ? AwaitPaced(after.average_us(), opt.spin_us)
              : (reader_.SpinFill(fd_, spin) ? std::optional(RequestWait::kPolled) : std::nullopt);
    if (!how && WaitForRequest(wait_ms)) how = RequestWait::kSlept;
    if (!how) {
      if (hello_done_) {  // idle: park, without a read buffer (nothing is in it)
        reader_.Release();
        return true;
      }
      continue;  // the handshake deadline is checked above
    }
    if (!reader_.Read(fd_, hdr, sizeof(hdr), io_timeout).ok()) return false;  // closed
    const int64_t gap_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - wait_start)
                               .count();
    gap_.Record(gap_us);
    gap_after_.of(last_opcode_).Record(gap_us);
    const proto::FrameHeader h = proto::DecodeHeader(hdr);
    last_opcode_ = h.opcode;
    if (Status st = proto::CheckHeader(h, opt.max_frame_bytes); !st.ok()) {
      server_->CountProtocolError();
      SendFatal(st);
      return false;
    }
    if (!hello_done_ && h.opcode != static_cast<uint16_t>(Opcode::kHello)) {
      server_->CountProtocolError();
      SendFatal(Status(Code::kProtocolError, "the first request must be HELLO"));
      return false;
    }
    body_.resize(h.body_len);
    if (h.body_len > 0 && !reader_.Read(fd_, body_.data(), h.body_len, io_timeout).ok()) {
      return false;
    }
    server_->CountRequest(*how);
    reply_.assign(proto::kHeaderSize, '\0');
    reply_body_start_ = reply_.size();
    Status st;
    if (h.flags & proto::kFlagResponse) {
      st = Status(Code::kProtocolError, "a response frame was sent to the manager");
    } else {
      st = Dispatch(h, body_);
    }
    if (!SendReply(h, st).ok()) return false;
  }
}

Status Session::SendReply(const proto::FrameHeader& request, const Status& status) {
  if (!status.ok()) {
    reply_.resize(reply_body_start_);
    Writer(&reply_).Str(status.message());
  }
  const auto body_len = static_cast<uint32_t>(reply_.size() - proto::kHeaderSize);
  proto::EncodeHeader(proto::ResponseHeader(request, status.code(), body_len),
                      reinterpret_cast<uint8_t*>(reply_.data()));
  const bool hello_with_fd =
      unix_socket_ && status.ok() && request.opcode == static_cast<uint16_t>(Opcode::kHello);
  if (hello_with_fd) {
    const int fds[] = {store_->pool_fd(), store_->generations_fd()};
    return proto::WriteWithFds(fd_, reply_.data(), reply_.size(),
                               std::span<const int>(fds, send_generations_ ? 2 : 1));
  }
  return proto::WriteFull(fd_, reply_.data(), reply_.size(), server_->options().io_timeout_ms);
}

void Session::SendFatal(const Status& status) {
  const std::string frame = proto::FatalFrame(status);
  (void)proto::WriteFull(fd_, frame.data(), frame.size(), 1000);
}

Status Session::RequireShm(std::string_view op) const {
  if (unix_socket_) return Status::Ok();
  return Status(Code::kNotSupported, std::string(op) +
                                         " needs the shared-memory pool, which only Unix-socket "
                                         "clients map; over TCP use put/get with inline bytes");
}

namespace {

// The latency tracepoint of each request kind, named after the REST contract's
// operations (a lease is a get, a commit an update_state).
Tracepoint* TracepointFor(uint16_t opcode) {
  static Tracepoint* const kPoints[] = {
      nullptr,
      Tracer::Global().Get("TP_MMC_META_HELLO"),
      Tracer::Global().Get("TP_MMC_META_ALLOC"),
      Tracer::Global().Get("TP_MMC_META_UPDATE_STATE"),
      Tracer::Global().Get("TP_MMC_META_ABORT"),
      Tracer::Global().Get("TP_MMC_META_PUT"),
      Tracer::Global().Get("TP_MMC_META_GET"),
      Tracer::Global().Get("TP_MMC_META_RELEASE"),
      Tracer::Global().Get("TP_MMC_META_GET_INLINE"),
      Tracer::Global().Get("TP_MMC_META_EXIST_KEY"),
      Tracer::Global().Get("TP_MMC_META_QUERY"),
      Tracer::Global().Get("TP_MMC_META_REMOVE"),
      Tracer::Global().Get("TP_MMC_META_REMOVE_ALL"),
      Tracer::Global().Get("TP_MMC_META_GET_ALL_KEYS"),
  };
  static Tracepoint* const kBatch[] = {
      Tracer::Global().Get("TP_MMC_META_BATCH_ALLOC"),
      Tracer::Global().Get("TP_MMC_META_BATCH_UPDATE_STATE"),
      Tracer::Global().Get("TP_MMC_META_BATCH_GET"),
      Tracer::Global().Get("TP_MMC_META_BATCH_RELEASE"),
      Tracer::Global().Get("TP_MMC_META_BATCH_PUT"),
      Tracer::Global().Get("TP_MMC_META_BATCH_GET_INLINE"),
      Tracer::Global().Get("TP_MMC_META_BATCH_EXIST_KEY"),
      Tracer::Global().Get("TP_MMC_META_BATCH_QUERY"),
      Tracer::Global().Get("TP_MMC_META_BATCH_REMOVE"),
      Tracer::Global().Get("TP_MMC_META_REPORT_METRICS"),
  };
  // A locate is a get without a lease.
  if (opcode == static_cast<uint16_t>(Opcode::kLocate)) return kPoints[6];
  // A pin is a get whose lease lasts; an unpin its release.
  if (opcode == static_cast<uint16_t>(Opcode::kPin)) return kPoints[6];
  if (opcode == static_cast<uint16_t>(Opcode::kUnpin)) return kPoints[7];
  if (opcode == static_cast<uint16_t>(Opcode::kBatchLocate)) return kBatch[2];
  if (opcode >= 1 && opcode < std::size(kPoints)) return kPoints[opcode];
  if (opcode >= 20 && opcode < 20 + std::size(kBatch)) return kBatch[opcode - 20];
  return nullptr;
}

}  // namespace

Status Session::Dispatch(const proto::FrameHeader& h, std::string_view body) {
  Tracepoint* tp = TracepointFor(h.opcode);
  if (tp == nullptr) return DispatchOp(h, body);
  TraceScope scope(tp);
  Status st = DispatchOp(h, body);
  scope.End(st.ok() || st.code() == Code::kNotFound);
  return st;
}

Status Session::DispatchOp(const proto::FrameHeader& h, std::string_view body) {
  switch (static_cast<Opcode>(h.opcode)) {
    case Opcode::kHello:
      return Hello(body);
    case Opcode::kAlloc:
      return Alloc(body);
    case Opcode::kCommit:
    case Opcode::kAbort:
    case Opcode::kRelease:
    case Opcode::kUnpin:
      return IdCall(static_cast<Opcode>(h.opcode), body);
    case Opcode::kPut:
      return Put(body);
    case Opcode::kLease:
      return Lease(body, ReadHold::kLease);
    case Opcode::kLocate:
      return Lease(body, ReadHold::kLocate);
    case Opcode::kPin:
      return Pin(body);
    case Opcode::kGet:
      return Get(body);
    case Opcode::kExist:
    case Opcode::kQuery:
    case Opcode::kRemove:
      return KeyCall(static_cast<Opcode>(h.opcode), body);
    case Opcode::kRemoveAll:
      return RemoveAll(body);
    case Opcode::kListKeys:
      return ListKeys(body);
    case Opcode::kBatchAlloc:
      return BatchAlloc(body);
    case Opcode::kBatchCommit:
    case Opcode::kBatchRelease:
      return BatchIds(static_cast<Opcode>(h.opcode), body);
    case Opcode::kBatchPut:
      return BatchPut(body);
    case Opcode::kBatchLease:
    case Opcode::kBatchLocate:
    case Opcode::kBatchGet:
    case Opcode::kBatchExist:
    case Opcode::kBatchQuery:
    case Opcode::kBatchRemove:
      return BatchKeys(static_cast<Opcode>(h.opcode), body);
    case Opcode::kReportMetrics: {
      Reader r(body);
      proto::ReportMetricsRequest req;
      if (Status st = req.Decode(r); !st.ok()) return st;
      return server_->client_metrics().Report(caller_.session, req,
                                              store_->clock()->NowUnixMillis());
    }
    case Opcode::kFatal:
      break;
  }
  return Status(Code::kNotSupported, "unknown opcode " + std::to_string(h.opcode));
}

Status Session::Hello(std::string_view body) {
  Reader r(body);
  proto::HelloRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  if (!ValidNamespace(req.name_space)) {
    return InvalidArgument("namespace '" + std::string(req.name_space.substr(0, 100)) +
                           "' is malformed: expected tierkv:v1: and 64 lowercase hex digits");
  }
  if ((req.flags & ~proto::kHelloGenerations) != 0) {
    return InvalidArgument("unknown hello flag bits " + std::to_string(req.flags));
  }
  send_generations_ = unix_socket_ && (req.flags & proto::kHelloGenerations) != 0;
  name_space_ = std::string(req.name_space);
  caller_.name_space = name_space_;
  caller_.rank = req.rank;
  hello_done_ = true;
  const ServerOptions& opt = server_->options();
  proto::HelloReply rep;
  rep.server_rank = opt.rank;
  rep.pool_size = store_->pool_capacity();
  rep.shm = unix_socket_ ? 1 : 0;
  rep.max_key_bytes = store_->options().max_key_bytes;
  rep.max_object_bytes = store_->options().max_object_bytes;
  rep.max_frame_bytes = opt.max_frame_bytes;
  rep.max_batch = opt.max_batch;
  rep.lease_ms = static_cast<uint32_t>(store_->options().lease_ms);
  rep.session_id = caller_.session;
  rep.has_generations_fields = (req.flags & proto::kHelloGenerations) != 0;
  rep.generations = send_generations_ ? 1 : 0;
  rep.generation_page_bytes = send_generations_ ? DramPool::kGenerationPageBytes : 0;
  Writer w(&reply_);
  rep.Encode(w);
  return Status::Ok();
}

Status Session::Alloc(std::string_view body) {
  if (Status st = RequireShm("alloc"); !st.ok()) return st;
  Reader r(body);
  proto::AllocRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  PutOptions po{req.group_id, (req.flags & proto::kPutUpsert) != 0};
  Result<AllocGrant> g = store_->Alloc(caller_, {req.tenant, req.key}, req.size, po);
  if (!g.ok()) return g.status();
  allocs_.insert(g->alloc_id);
  Writer w(&reply_);
  proto::EncodeAllocReply(w, {g->alloc_id, g->offset});
  return Status::Ok();
}

Status Session::IdCall(Opcode op, std::string_view body) {
  Reader r(body);
  const uint64_t id = r.U64();
  if (Status st = r.Finish(proto::OpcodeName(static_cast<uint16_t>(op))); !st.ok()) return st;
  switch (op) {
    case Opcode::kCommit:
      allocs_.erase(id);
      return store_->Commit(caller_, id);
    case Opcode::kAbort:
      allocs_.erase(id);
      return store_->Abort(caller_, id);
    case Opcode::kUnpin: {
      Status st = store_->Unpin(caller_.session, id);
      if (st.ok()) pins_.fetch_sub(1, std::memory_order_relaxed);
      return st;
    }
    default:
      leases_.erase(id);
      return store_->Release(caller_, id);
  }
}

Status Session::PutInline(std::string_view tenant, std::string_view key, std::string_view group_id,
                          uint8_t flags, std::string_view value) {
  PutOptions po{group_id, (flags & proto::kPutUpsert) != 0};
  Result<AllocGrant> g = store_->Alloc(caller_, {tenant, key}, value.size(), po);
  if (!g.ok()) return g.status();
  std::memcpy(g->data, value.data(), value.size());
  return store_->Commit(caller_, g->alloc_id);
}

Status Session::Put(std::string_view body) {
  Reader r(body);
  proto::PutRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  return PutInline(req.tenant, req.key, req.group_id, req.flags, req.value);
}

Status Session::Lease(std::string_view body, ReadHold hold) {
  if (Status st = RequireShm(hold == ReadHold::kLocate ? "locate" : "lease"); !st.ok()) return st;
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  Result<LeaseGrant> g = LeaseOrFetch(req.tenant, req.key, hold);
  if (!g.ok()) return g.status();
  EncodeGrant(*g, hold);
  return Status::Ok();
}

Status Session::Pin(std::string_view body) {
  if (Status st = RequireShm("pin"); !st.ok()) return st;
  const uint64_t budget = server_->options().max_pinned_bytes;
  if (budget == 0) return Status(Code::kNotSupported, "this manager takes no pins");
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  // The lease makes this a get (hits, fetched from its owner in cluster mode)
  // and keeps the value in DRAM until the pin holds it.
  Result<LeaseGrant> g = LeaseOrFetch(req.tenant, req.key, ReadHold::kLease);
  if (!g.ok()) return g.status();
  Result<PinGrant> p = store_->Pin(caller_.session, {req.tenant, req.key}, 0, budget,
                                   /*may_rewarm=*/false);
  (void)store_->Release(caller_, g->lease_id);
  if (!p.ok()) return p.status();
  pins_.fetch_add(1, std::memory_order_relaxed);
  Writer w(&reply_);
  proto::EncodeLeaseReply(
      w, {p->pin_id, static_cast<uint64_t>(p->data - store_->pool_base()), p->size, 0, 0});
  return Status::Ok();
}

void Session::EncodeGrant(const LeaseGrant& g, ReadHold hold) {
  if (g.lease_id != 0) leases_.insert(g.lease_id);
  Writer w(&reply_);
  const proto::LeaseReply l{g.lease_id, g.offset, g.size, g.deadline_nanos, g.generation};
  if (hold == ReadHold::kLocate) {
    proto::EncodeLocateReply(w, l);
  } else {
    proto::EncodeLeaseReply(w, l);
  }
}

Result<LeaseGrant> Session::LeaseOrFetch(std::string_view tenant, std::string_view key,
                                         ReadHold hold) {
  Result<LeaseGrant> g = store_->Lease(caller_, {tenant, key}, hold);
  const RemoteCatalog* catalog = server_->catalog();
  if (g.ok() || g.status().code() != Code::kNotFound || catalog == nullptr) return g;
  const std::string_view one[] = {key};
  // A fetched copy can be dropped before it is read here (its owner replaced
  // or removed the value meanwhile, cluster/copy_tracker.h): fetch again.
  std::vector<uint64_t> superseded;
  for (int round = 0; round < kFetchRounds; ++round) {
    Status fetched =
        std::move(catalog->Fetch(tenant, one, caller_.name_space, &superseded).front());
    if (!fetched.ok()) return fetched;
    // A lease: a superseded copy is read under it, never served again.
    g = store_->Lease(caller_, {tenant, key}, superseded[0] != 0 ? ReadHold::kLease : hold);
    if (superseded[0] != 0) (void)store_->RemoveIfAt({tenant, key}, superseded[0]);
    if (g.ok() || g.status().code() != Code::kNotFound) break;
  }
  return g;
}

std::vector<Result<LeaseGrant>> Session::BatchLeaseOrFetch(std::string_view tenant,
                                                           std::span<const std::string_view> keys,
                                                           ReadHold hold) {
  std::vector<Result<LeaseGrant>> grants = store_->BatchLease(caller_, tenant, keys, hold);
  const RemoteCatalog* catalog = server_->catalog();
  if (catalog == nullptr) return grants;
  std::vector<size_t> missed;
  std::vector<std::string_view> missed_keys;
  for (size_t i = 0; i < grants.size(); ++i) {
    if (!grants[i].ok() && grants[i].status().code() == Code::kNotFound) {
      missed.push_back(i);
      missed_keys.push_back(keys[i]);
    }
  }
  // As LeaseOrFetch: a key whose fetched copy went before it was read is
  // fetched again.
  std::vector<uint64_t> superseded;
  for (int round = 0; round < kFetchRounds && !missed.empty(); ++round) {
    std::vector<Status> fetched =
        catalog->Fetch(tenant, missed_keys, caller_.name_space, &superseded);
    std::vector<size_t> again;
    std::vector<std::string_view> again_keys;
    for (size_t j = 0; j < missed.size(); ++j) {
      if (!fetched[j].ok()) {
        grants[missed[j]] = std::move(fetched[j]);
        continue;
      }
      const ObjectRef ref{tenant, missed_keys[j]};
      grants[missed[j]] = store_->Lease(caller_, ref, superseded[j] != 0 ? ReadHold::kLease : hold);
      if (superseded[j] != 0) (void)store_->RemoveIfAt(ref, superseded[j]);
      if (!grants[missed[j]].ok() && grants[missed[j]].status().code() == Code::kNotFound) {
        again.push_back(missed[j]);
        again_keys.push_back(missed_keys[j]);
      }
    }
    missed = std::move(again);
    missed_keys = std::move(again_keys);
  }
  return grants;
}

Status Session::GetInline(std::string_view tenant, std::string_view key) {
  Result<LeaseGrant> g = LeaseOrFetch(tenant, key);
  if (!g.ok()) return g.status();
  const size_t mark = reply_.size();
  Writer w(&reply_);
  char* dst = w.BlobSpace(g->size);
  std::memcpy(dst, g->data, g->size);
  Status st = store_->Release(caller_, g->lease_id);
  if (!st.ok()) reply_.resize(mark);  // never hand out bytes that may have been reused
  return st;
}

Status Session::Get(std::string_view body) {
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  return GetInline(req.tenant, req.key);
}

Status Session::KeyCall(Opcode op, std::string_view body) {
  Reader r(body);
  proto::KeyRequest req;
  if (Status st = req.Decode(r); !st.ok()) return st;
  if (Status st = CheckLookupFlags(op, req.lookup_flags); !st.ok()) return st;
  const ObjectRef ref{req.tenant, req.key};
  if (op == Opcode::kRemove) return store_->Remove(caller_, ref);
  if (op == Opcode::kExist) {
    Status local = store_->Exist(caller_, ref);
    if (local.code() != Code::kNotFound) return local;
    return Lookup(req.tenant, req.key, req.lookup_flags, local).status();
  }
  Result<ObjectInfo> info =
      Lookup(req.tenant, req.key, req.lookup_flags, store_->Query(caller_, ref));
  if (!info.ok()) return info.status();
  Writer w(&reply_);
  proto::EncodeObjectInfo(w, *info);
  return Status::Ok();
}

Status Session::RemoveAll(std::string_view body) {
  Reader r(body);
  proto::RemoveAllRequest req;
  if (Status st = proto::DecodeRemoveAllRequest(r, &req); !st.ok()) return st;
  Result<RemoveAllResult> res = store_->RemoveAll(caller_, req.tenant, req.force != 0);
  if (!res.ok()) return res.status();
  Writer w(&reply_);
  w.U64(res->removed);
  w.U64(res->skipped);
  w.U8(res->cleared ? 1 : 0);
  return Status::Ok();
}

Status Session::ListKeys(std::string_view body) {
  Reader r(body);
  proto::ListKeysRequest req;
  if (Status st = proto::DecodeListKeysRequest(r, &req); !st.ok()) return st;
  Result<std::vector<std::string>> keys =
      store_->ListKeys(caller_, req.tenant, req.prefix, req.limit);
  if (!keys.ok()) return keys.status();
  // Keep the reply within the frame limit; the truncated flag tells the client.
  const size_t budget = server_->options().max_frame_bytes;
  size_t bytes = 0;
  size_t n = 0;
  for (; n < keys->size(); ++n) {
    bytes += 4 + (*keys)[n].size();
    if (bytes > budget) break;
  }
  Writer w(&reply_);
  w.U8(n < keys->size() ? 1 : 0);
  w.U32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) w.Str((*keys)[i]);
  return Status::Ok();
}

Status Session::BatchAlloc(std::string_view body) {
  if (Status st = RequireShm("batch_alloc"); !st.ok()) return st;
  Reader r(body);
  proto::BatchAllocRequest req;
  if (Status st = req.Decode(r, server_->options().max_batch); !st.ok()) return st;
  std::vector<AllocItem> items;
  items.reserve(req.items.size());
  for (const auto& it : req.items) {
    items.push_back({it.key, it.size, {it.group_id, (it.flags & proto::kPutUpsert) != 0}});
  }
  std::vector<Result<AllocGrant>> grants = store_->BatchAlloc(caller_, req.tenant, items);
  Writer w(&reply_);
  w.U32(static_cast<uint32_t>(grants.size()));
  for (const auto& g : grants) {
    w.ItemStatus(g.status());
    if (g.ok()) {
      allocs_.insert(g->alloc_id);
      proto::EncodeAllocReply(w, {g->alloc_id, g->offset});
    }
  }
  return Status::Ok();
}

Status Session::BatchIds(Opcode op, std::string_view body) {
  Reader r(body);
  proto::BatchIdsRequest req;
  if (Status st = req.Decode(r, server_->options().max_batch); !st.ok()) return st;
  std::vector<Status> out;
  if (op == Opcode::kBatchCommit) {
    for (uint64_t id : req.ids) allocs_.erase(id);
    out = store_->BatchCommit(caller_, req.ids);
  } else {
    for (uint64_t id : req.ids) leases_.erase(id);
    out = store_->BatchRelease(caller_, req.ids);
  }
  Writer w(&reply_);
  w.U32(static_cast<uint32_t>(out.size()));
  for (const Status& st : out) w.ItemStatus(st);
  return Status::Ok();
}

Status Session::BatchPut(std::string_view body) {
  Reader r(body);
  proto::BatchPutRequest req;
  if (Status st = req.Decode(r, server_->options().max_batch); !st.ok()) return st;
  // Inline puts run item by item through alloc/commit, so each item is counted
  // under batch_alloc + batch_update_state like a shared-memory batch put.
  std::vector<AllocItem> items;
  items.reserve(req.items.size());
  for (const auto& it : req.items) {
    items.push_back({it.key, it.value.size(), {it.group_id, (it.flags & proto::kPutUpsert) != 0}});
  }
  std::vector<Result<AllocGrant>> grants = store_->BatchAlloc(caller_, req.tenant, items);
  std::vector<uint64_t> ids;
  std::vector<size_t> idx;
  for (size_t i = 0; i < grants.size(); ++i) {
    if (!grants[i].ok()) continue;
    std::memcpy(grants[i]->data, req.items[i].value.data(), req.items[i].value.size());
    ids.push_back(grants[i]->alloc_id);
    idx.push_back(i);
  }
  std::vector<Status> commits = store_->BatchCommit(caller_, ids);
  std::vector<Status> out(grants.size());
  for (size_t i = 0; i < grants.size(); ++i) out[i] = grants[i].status();
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = commits[j];
  Writer w(&reply_);
  w.U32(static_cast<uint32_t>(out.size()));
  for (const Status& st : out) w.ItemStatus(st);
  return Status::Ok();
}

Status Session::CheckLookupFlags(Opcode op, uint8_t flags) {
  if (flags == 0) return Status::Ok();
  const bool lookup = op == Opcode::kExist || op == Opcode::kQuery || op == Opcode::kBatchExist ||
                      op == Opcode::kBatchQuery;
  if (!lookup) return InvalidArgument("lookup flags are only for exist and query requests");
  if ((flags & ~proto::kLookupLocalOnly) != 0) {
    return InvalidArgument("unknown lookup flag bits " + std::to_string(flags));
  }
  return Status::Ok();
}

Result<ObjectInfo> Session::Lookup(std::string_view tenant, std::string_view key, uint8_t flags,
                                   Result<ObjectInfo> local) const {
  const RemoteCatalog* catalog = server_->catalog();
  if (local.ok() || local.status().code() != Code::kNotFound || catalog == nullptr ||
      (flags & proto::kLookupLocalOnly) != 0) {
    return local;
  }
  RemoteAnswer a = catalog->Lookup(tenant, key, caller_.name_space);
  switch (a.kind) {
    case RemoteAnswer::kFound:
      return std::move(a.info);
    case RemoteAnswer::kAbsent:
      return NotFound("not found on any manager of the cluster");
    case RemoteAnswer::kUnknown:
      return Status(Code::kUnavailable, "not found here; elsewhere unknown: " + a.why);
    case RemoteAnswer::kOutOfScope:
      return Status(Code::kUnavailable, "not found here; out of this manager's scope: " + a.why);
  }
  return local;
}

Status Session::BatchKeys(Opcode op, std::string_view body) {
  if (op == Opcode::kBatchLease || op == Opcode::kBatchLocate) {
    if (Status st = RequireShm(proto::OpcodeName(static_cast<uint16_t>(op))); !st.ok()) return st;
  }
  Reader r(body);
  proto::BatchKeysRequest req;
  if (Status st = req.Decode(r, server_->options().max_batch); !st.ok()) return st;
  if (Status st = CheckLookupFlags(op, req.lookup_flags); !st.ok()) return st;
  Writer w(&reply_);
  w.U32(static_cast<uint32_t>(req.keys.size()));
  switch (op) {
    case Opcode::kBatchLease:
    case Opcode::kBatchLocate: {
      const ReadHold hold = op == Opcode::kBatchLocate ? ReadHold::kLocate : ReadHold::kLease;
      for (const auto& g : BatchLeaseOrFetch(req.tenant, req.keys, hold)) {
        w.ItemStatus(g.status());
        if (g.ok()) EncodeGrant(*g, hold);
      }
      return Status::Ok();
    }
    case Opcode::kBatchGet: {
      // Inline values: copy under lease, release, and stop adding bytes once the
      // reply reaches the frame limit (the rest answer RETRY).
      std::vector<Result<LeaseGrant>> grants = BatchLeaseOrFetch(req.tenant, req.keys);
      const size_t budget = server_->options().max_frame_bytes;
      size_t bytes = 0;
      bool full = false;
      for (auto& g : grants) {
        if (!g.ok()) {
          w.ItemStatus(g.status());
          continue;
        }
        full = full || (bytes > 0 && bytes + g->size > budget);
        if (full) {
          (void)store_->Release(caller_, g->lease_id);
          w.ItemStatus(Status(Code::kRetry, "reply size limit reached; fetch this key again"));
          continue;
        }
        bytes += g->size;
        const size_t mark = reply_.size();
        w.ItemStatus(Status::Ok());
        std::memcpy(w.BlobSpace(g->size), g->data, g->size);
        if (Status st = store_->Release(caller_, g->lease_id); !st.ok()) {
          reply_.resize(mark);
          w.ItemStatus(st);
        }
      }
      return Status::Ok();
    }
    case Opcode::kBatchExist: {
      std::vector<Status> each = store_->BatchExist(caller_, req.tenant, req.keys);
      for (size_t i = 0; i < each.size(); ++i) {
        Status st = each[i];
        if (st.code() == Code::kNotFound) {
          st = Lookup(req.tenant, req.keys[i], req.lookup_flags, st).status();
        }
        w.ItemStatus(st);
      }
      return Status::Ok();
    }
    case Opcode::kBatchQuery: {
      std::vector<Result<ObjectInfo>> each = store_->BatchQuery(caller_, req.tenant, req.keys);
      for (size_t i = 0; i < each.size(); ++i) {
        Result<ObjectInfo> info =
            Lookup(req.tenant, req.keys[i], req.lookup_flags, std::move(each[i]));
        w.ItemStatus(info.status());
        if (info.ok()) proto::EncodeObjectInfo(w, *info);
      }
      return Status::Ok();
    }
    default:
      for (const Status& st : store_->BatchRemove(caller_, req.tenant, req.keys)) {
        w.ItemStatus(st);
      }
      return Status::Ok();
  }
}

}  // namespace tierkv
