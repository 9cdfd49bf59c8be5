// The batch calls of RequestHandler.
#include <cstring>

#include "protocol/messages.h"
#include "server/request_handler.h"
#include "server/server.h"

namespace tierkv {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

template <>
Status RequestHandler::On<Opcode::kBatchAlloc>(std::string_view body) {
  if (Status st = RequireShm("batch_alloc"); !st.ok()) return st;
  Reader r(body);
  proto::BatchAllocRequest req;
  if (Status st = req.Decode(r, ctx_.options->max_batch); !st.ok()) return st;
  std::vector<AllocItem> items;
  items.reserve(req.items.size());
  for (const auto& it : req.items) {
    PutOptions po{it.group_id, (it.flags & proto::kPutUpsert) != 0};
    if ((it.flags & proto::kPutHbm) != 0 && hbm_session_) po.medium = Medium::kHbm;
    items.push_back({it.key, it.size, po});
  }
  std::vector<Result<AllocGrant>> grants = ctx_.store->BatchAlloc(caller_, req.tenant, items);
  Writer w(reply_);
  w.U32(static_cast<uint32_t>(grants.size()));
  for (size_t i = 0; i < grants.size(); ++i) {
    w.ItemStatus(grants[i].status());
    if (grants[i].ok()) EncodeAlloc(*grants[i], (req.items[i].flags & proto::kPutHbm) != 0);
  }
  return Status::Ok();
}

Status RequestHandler::BatchIds(Opcode op, std::string_view body) {
  Reader r(body);
  proto::BatchIdsRequest req;
  if (Status st = req.Decode(r, ctx_.options->max_batch); !st.ok()) return st;
  std::vector<Status> out;
  if (op == Opcode::kBatchCommit) {
    for (uint64_t id : req.ids) allocs_.erase(id);
    out = ctx_.store->BatchCommit(caller_, req.ids);
  } else {
    for (uint64_t id : req.ids) leases_.erase(id);
    out = ctx_.store->BatchRelease(caller_, req.ids);
  }
  Writer w(reply_);
  proto::EncodeStatuses(w, out);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kBatchCommit>(std::string_view body) {
  return BatchIds(Opcode::kBatchCommit, body);
}

template <>
Status RequestHandler::On<Opcode::kBatchRelease>(std::string_view body) {
  return BatchIds(Opcode::kBatchRelease, body);
}

template <>
Status RequestHandler::On<Opcode::kBatchPut>(std::string_view body) {
  Reader r(body);
  proto::BatchPutRequest req;
  if (Status st = req.Decode(r, ctx_.options->max_batch); !st.ok()) return st;
  // Inline puts run item by item through alloc/commit, so each item is counted
  // under batch_alloc + batch_update_state like a shared-memory batch put.
  std::vector<AllocItem> items;
  items.reserve(req.items.size());
  for (const auto& it : req.items) {
    items.push_back({it.key, it.value.size(), {it.group_id, (it.flags & proto::kPutUpsert) != 0}});
  }
  Store* store = ctx_.store;
  std::vector<Result<AllocGrant>> grants = store->BatchAlloc(caller_, req.tenant, items);
  std::vector<uint64_t> ids;
  std::vector<size_t> idx;
  for (size_t i = 0; i < grants.size(); ++i) {
    if (!grants[i].ok()) continue;
    std::memcpy(grants[i]->data, req.items[i].value.data(), req.items[i].value.size());
    ids.push_back(grants[i]->alloc_id);
    idx.push_back(i);
  }
  std::vector<Status> commits = store->BatchCommit(caller_, ids);
  std::vector<Status> out(grants.size());
  for (size_t i = 0; i < grants.size(); ++i) out[i] = grants[i].status();
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = commits[j];
  Writer w(reply_);
  proto::EncodeStatuses(w, out);
  return Status::Ok();
}

Status RequestHandler::BatchGetInline(const proto::BatchKeysRequest& req, Writer& w) {
  // Inline values: copy under lease, release, and stop adding bytes once the
  // reply reaches the frame limit (the rest answer RETRY).
  std::vector<Result<LeaseGrant>> grants = BatchLeaseOrFetch(req.tenant, req.keys);
  const size_t budget = ctx_.options->max_frame_bytes;
  Store* store = ctx_.store;
  size_t bytes = 0;
  bool full = false;
  for (auto& g : grants) {
    if (!g.ok()) {
      w.ItemStatus(g.status());
      continue;
    }
    full = full || (bytes > 0 && bytes + g->size > budget);
    if (full) {
      (void)store->Release(caller_, g->lease_id);
      w.ItemStatus(Status(Code::kRetry, "reply size limit reached; fetch this key again"));
      continue;
    }
    bytes += g->size;
    const size_t mark = reply_->size();
    w.ItemStatus(Status::Ok());
    std::memcpy(w.BlobSpace(g->size), g->data, g->size);
    if (Status st = store->Release(caller_, g->lease_id); !st.ok()) {
      reply_->resize(mark);
      w.ItemStatus(st);
    }
  }
  return Status::Ok();
}

Status RequestHandler::BatchKeys(Opcode op, std::string_view body) {
  if (op == Opcode::kBatchLease || op == Opcode::kBatchLocate) {
    if (Status st = RequireShm(proto::OpcodeName(static_cast<uint16_t>(op))); !st.ok()) return st;
  }
  Reader r(body);
  proto::BatchKeysRequest req;
  if (Status st = req.Decode(r, ctx_.options->max_batch); !st.ok()) return st;
  if (Status st = CheckLookupFlags(op, req.lookup_flags); !st.ok()) return st;
  Store* store = ctx_.store;
  Writer w(reply_);
  w.U32(static_cast<uint32_t>(req.keys.size()));
  switch (op) {
    case Opcode::kBatchLease:
    case Opcode::kBatchLocate: {
      const ReadHold hold = HoldFor(op, req.lookup_flags);
      const bool placement = (req.lookup_flags & proto::kLookupHbm) != 0;
      for (const auto& g : BatchLeaseOrFetch(req.tenant, req.keys, hold)) {
        w.ItemStatus(g.status());
        if (g.ok()) EncodeGrant(*g, hold, placement);
      }
      return Status::Ok();
    }
    case Opcode::kBatchGet:
      return BatchGetInline(req, w);
    case Opcode::kBatchExist: {
      std::vector<Status> each = store->BatchExist(caller_, req.tenant, req.keys);
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
      std::vector<Result<ObjectInfo>> each = store->BatchQuery(caller_, req.tenant, req.keys);
      for (size_t i = 0; i < each.size(); ++i) {
        Result<ObjectInfo> info =
            Lookup(req.tenant, req.keys[i], req.lookup_flags, std::move(each[i]));
        w.ItemStatus(info.status());
        if (info.ok()) proto::EncodeObjectInfo(w, *info);
      }
      return Status::Ok();
    }
    default:
      for (const Status& st : store->BatchRemove(caller_, req.tenant, req.keys)) {
        w.ItemStatus(st);
      }
      return Status::Ok();
  }
}

#define TIERKV_BATCH_KEYS_HANDLER(name)                            \
  template <>                                                      \
  Status RequestHandler::On<Opcode::name>(std::string_view body) { \
    return BatchKeys(Opcode::name, body);                          \
  }
TIERKV_BATCH_KEYS_HANDLER(kBatchLease)
TIERKV_BATCH_KEYS_HANDLER(kBatchLocate)
TIERKV_BATCH_KEYS_HANDLER(kBatchGet)
TIERKV_BATCH_KEYS_HANDLER(kBatchExist)
TIERKV_BATCH_KEYS_HANDLER(kBatchQuery)
TIERKV_BATCH_KEYS_HANDLER(kBatchRemove)
#undef TIERKV_BATCH_KEYS_HANDLER

}  // namespace tierkv
