#include "protocol/messages.h"

#include <cstring>

namespace tierkv::proto {
namespace {

// Smallest encoding of one key in a batch (its u32 length).
constexpr size_t kMinKeyBytes = 4;

Status CheckBatch(uint32_t n, uint32_t max_batch, Reader& r, std::string_view what) {
  if (!r.ok()) return Status(Code::kProtocolError, std::string(what) + ": truncated item count");
  if (n > max_batch) {
    return Status(Code::kTooLarge, std::string(what) + " of " + std::to_string(n) +
                                       " items exceeds the limit of " + std::to_string(max_batch));
  }
  return Status::Ok();
}

std::string HexByte(uint8_t b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return {kDigits[b >> 4], kDigits[b & 15]};
}

}  // namespace

Status CheckPutFlags(uint8_t flags, std::string_view what, uint8_t known) {
  if ((flags & ~known) == 0) return Status::Ok();
  return InvalidArgument(std::string(what) + ": unknown flag bits 0x" +
                         HexByte(static_cast<uint8_t>(flags & ~known)));
}

void HelloRequest::Encode(Writer& w) const {
  w.U32(rank);
  w.Str(client_name);
  if (!name_space.empty() || flags != 0) w.Str(name_space);
  if (flags != 0) w.U8(flags);
}

Status HelloRequest::Decode(Reader& r) {
  rank = r.U32();
  client_name = r.Str();
  name_space = r.done() ? std::string_view() : r.Str();
  flags = r.done() ? 0 : r.U8();
  return r.Finish("hello");
}

void HelloReply::Encode(Writer& w) const {
  w.U32(server_rank);
  w.U64(pool_size);
  w.U8(shm);
  w.U32(max_key_bytes);
  w.U64(max_object_bytes);
  w.U32(max_frame_bytes);
  w.U32(max_batch);
  w.U32(lease_ms);
  w.U64(session_id);
  if (has_generations_fields || has_hbm_fields) {
    w.U8(generations);
    w.U32(generation_page_bytes);
  }
  if (has_hbm_fields) {
    w.U32(static_cast<uint32_t>(hbm_pools.size()));
    for (const HbmPoolInfo& p : hbm_pools) {
      w.U32(static_cast<uint32_t>(p.device));
      w.U64(p.capacity);
      w.U8(p.backend);
      w.Str(std::string_view(reinterpret_cast<const char*>(p.handle.data()), p.handle.size()));
    }
  }
}

Status HelloReply::Decode(Reader& r) {
  server_rank = r.U32();
  pool_size = r.U64();
  shm = r.U8();
  max_key_bytes = r.U32();
  max_object_bytes = r.U64();
  max_frame_bytes = r.U32();
  max_batch = r.U32();
  lease_ms = r.U32();
  session_id = r.U64();
  has_generations_fields = !r.done();
  if (has_generations_fields) {
    generations = r.U8();
    generation_page_bytes = r.U32();
  }
  has_hbm_fields = !r.done();
  if (has_hbm_fields) {
    hbm_pools.resize(r.Count(4 + 8 + 1 + 4 + 64));
    for (HbmPoolInfo& p : hbm_pools) {
      p.device = static_cast<int32_t>(r.U32());
      p.capacity = r.U64();
      p.backend = r.U8();
      std::string_view h = r.Str();
      if (h.size() != p.handle.size()) {
        return Status(Code::kProtocolError, "hello reply: an HBM pool handle is not 64 bytes");
      }
      std::memcpy(p.handle.data(), h.data(), h.size());
    }
  }
  return r.Finish("hello reply");
}

void KeyRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.Str(key);
  if (lookup_flags != 0) w.U8(lookup_flags);
}

Status KeyRequest::Decode(Reader& r) {
  tenant = r.Str();
  key = r.Str();
  lookup_flags = r.done() ? 0 : r.U8();
  return r.Finish("key request");
}

void AllocRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.Str(key);
  w.U64(size);
  w.Str(group_id);
  w.U8(flags);
}

Status AllocRequest::Decode(Reader& r) {
  tenant = r.Str();
  key = r.Str();
  size = r.U64();
  group_id = r.Str();
  flags = r.U8();
  if (Status st = r.Finish("alloc"); !st.ok()) return st;
  return CheckPutFlags(flags, "alloc", kAllocKnownFlags);
}

void PutRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.Str(key);
  w.Str(group_id);
  w.U8(flags);
  w.Str(value);
}

Status PutRequest::Decode(Reader& r) {
  tenant = r.Str();
  key = r.Str();
  group_id = r.Str();
  flags = r.U8();
  value = r.Str();
  if (Status st = r.Finish("put"); !st.ok()) return st;
  return CheckPutFlags(flags, "put");
}

void BatchKeysRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.U32(static_cast<uint32_t>(keys.size()));
  for (std::string_view k : keys) w.Str(k);
  if (lookup_flags != 0) w.U8(lookup_flags);
}

Status BatchKeysRequest::Decode(Reader& r, uint32_t max_batch) {
  tenant = r.Str();
  const uint32_t n = r.Count(kMinKeyBytes);
  if (Status st = CheckBatch(n, max_batch, r, "batch"); !st.ok()) return st;
  keys.resize(n);
  for (auto& k : keys) k = r.Str();
  lookup_flags = r.done() ? 0 : r.U8();
  return r.Finish("batch keys");
}

void GetIntoRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.U32(static_cast<uint32_t>(items.size()));
  for (const Item& it : items) {
    w.Str(it.key);
    w.U8(it.flags);
    w.U32(it.piece_count);
    for (uint32_t p = 0; p < it.piece_count; ++p) {
      const Piece& piece = pieces[it.first_piece + p];
      w.U64(piece.region);
      w.U64(piece.offset);
      w.U64(piece.length);
    }
  }
}

Status GetIntoRequest::Decode(Reader& r, uint32_t max_batch, uint32_t max_pieces) {
  constexpr size_t kPieceBytes = 24;
  tenant = r.Str();
  const uint32_t n = r.Count(kMinKeyBytes + 1 + 4);
  if (Status st = CheckBatch(n, max_batch, r, "batch_get_into"); !st.ok()) return st;
  items.resize(n);
  pieces.clear();
  for (Item& it : items) {
    it.key = r.Str();
    it.flags = r.U8();
    const uint32_t m = r.Count(kPieceBytes);
    if (!r.ok()) break;
    if ((it.flags & ~kIntoExact) != 0) {
      return InvalidArgument("batch_get_into: unknown item flag bits " + std::to_string(it.flags));
    }
    if (m == 0) return InvalidArgument("batch_get_into: an item names no memory to fill");
    if (pieces.size() + m > max_pieces) {
      return Status(Code::kTooLarge, "batch_get_into: more than " + std::to_string(max_pieces) +
                                         " pieces of memory in one request");
    }
    it.first_piece = static_cast<uint32_t>(pieces.size());
    it.piece_count = m;
    for (uint32_t p = 0; p < m; ++p) {
      Piece piece;
      piece.region = r.U64();
      piece.offset = r.U64();
      piece.length = r.U64();
      pieces.push_back(piece);
    }
  }
  return r.Finish("batch_get_into");
}

void BatchAllocRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.U32(static_cast<uint32_t>(items.size()));
  for (const Item& it : items) {
    w.Str(it.key);
    w.U64(it.size);
    w.Str(it.group_id);
    w.U8(it.flags);
  }
}

Status BatchAllocRequest::Decode(Reader& r, uint32_t max_batch) {
  tenant = r.Str();
  const uint32_t n = r.Count(kMinKeyBytes + 8 + 4 + 1);
  if (Status st = CheckBatch(n, max_batch, r, "batch_alloc"); !st.ok()) return st;
  items.resize(n);
  for (Item& it : items) {
    it.key = r.Str();
    it.size = r.U64();
    it.group_id = r.Str();
    it.flags = r.U8();
  }
  if (Status st = r.Finish("batch_alloc"); !st.ok()) return st;
  for (const Item& it : items) {
    if (Status st = CheckPutFlags(it.flags, "batch_alloc", kAllocKnownFlags); !st.ok()) return st;
  }
  return Status::Ok();
}

void BatchIdsRequest::Encode(Writer& w) const {
  w.U32(static_cast<uint32_t>(ids.size()));
  for (uint64_t id : ids) w.U64(id);
}

Status BatchIdsRequest::Decode(Reader& r, uint32_t max_batch) {
  const uint32_t n = r.Count(8);
  if (Status st = CheckBatch(n, max_batch, r, "batch ids"); !st.ok()) return st;
  ids.resize(n);
  for (uint64_t& id : ids) id = r.U64();
  return r.Finish("batch ids");
}

void BatchPutRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.U32(static_cast<uint32_t>(items.size()));
  for (const Item& it : items) {
    w.Str(it.key);
    w.Str(it.group_id);
    w.U8(it.flags);
    if (it.parts.empty()) {
      w.Str(it.value);
      continue;
    }
    size_t total = 0;
    for (std::string_view part : it.parts) total += part.size();
    char* dst = w.BlobSpace(total);
    for (std::string_view part : it.parts) {
      std::memcpy(dst, part.data(), part.size());
      dst += part.size();
    }
  }
}

Status BatchPutRequest::Decode(Reader& r, uint32_t max_batch) {
  tenant = r.Str();
  const uint32_t n = r.Count(kMinKeyBytes + 4 + 1 + 4);
  if (Status st = CheckBatch(n, max_batch, r, "batch_put"); !st.ok()) return st;
  items.resize(n);
  for (Item& it : items) {
    it.key = r.Str();
    it.group_id = r.Str();
    it.flags = r.U8();
    it.value = r.Str();
  }
  if (Status st = r.Finish("batch_put"); !st.ok()) return st;
  for (const Item& it : items) {
    if (Status st = CheckPutFlags(it.flags, "batch_put"); !st.ok()) return st;
  }
  return Status::Ok();
}

namespace {

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

double FromBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

}  // namespace

void ReportMetricsRequest::Encode(Writer& w) const {
  w.U32(rank);
  w.U8(static_cast<uint8_t>(ops.size()));
  for (const OpWindow& o : ops) {
    w.U8(o.op);
    w.U64(o.window_bytes);
    w.U64(o.window_duration_ms);
    w.U64(Bits(o.bytes_per_sec));
    w.U64(Bits(o.p50_s));
    w.U64(Bits(o.p90_s));
    w.U64(Bits(o.p99_s));
    w.U64(Bits(o.avg_s));
    w.U64(o.cum_bytes);
    w.U64(o.cum_duration_ms);
  }
}

Status ReportMetricsRequest::Decode(Reader& r) {
  rank = r.U32();
  const uint8_t n = r.U8();
  if (n > 3) return Status(Code::kProtocolError, "report_metrics: more than 3 operations");
  ops.resize(n);
  for (OpWindow& o : ops) {
    o.op = r.U8();
    o.window_bytes = r.U64();
    o.window_duration_ms = r.U64();
    o.bytes_per_sec = FromBits(r.U64());
    o.p50_s = FromBits(r.U64());
    o.p90_s = FromBits(r.U64());
    o.p99_s = FromBits(r.U64());
    o.avg_s = FromBits(r.U64());
    o.cum_bytes = r.U64();
    o.cum_duration_ms = r.U64();
    if (o.op > 2) return Status(Code::kProtocolError, "report_metrics: unknown operation");
  }
  return r.Finish("report_metrics");
}

void EncodeAllocReply(Writer& w, const AllocReply& a) {
  w.U64(a.alloc_id);
  w.U64(a.offset);
}

AllocReply DecodeAllocReply(Reader& r) {
  AllocReply a;
  a.alloc_id = r.U64();
  a.offset = r.U64();
  return a;
}

void EncodePlacement(Writer& w, Medium medium, uint32_t pool) {
  w.U8(static_cast<uint8_t>(medium));
  w.U32(pool);
}

bool DecodePlacement(Reader& r, Medium* medium, uint32_t* pool) {
  const uint8_t m = r.U8();
  *pool = r.U32();
  *medium = static_cast<Medium>(m);
  return r.ok() && (*medium == Medium::kHbm || *medium == Medium::kDram);
}

void EncodeLeaseReply(Writer& w, const LeaseReply& l) {
  w.U64(l.lease_id);
  w.U64(l.offset);
  w.U64(l.size);
  w.I64(l.deadline_nanos);
}

LeaseReply DecodeLeaseReply(Reader& r) {
  LeaseReply l;
  l.lease_id = r.U64();
  l.offset = r.U64();
  l.size = r.U64();
  l.deadline_nanos = r.I64();
  return l;
}

void EncodeLocateReply(Writer& w, const LeaseReply& l) {
  EncodeLeaseReply(w, l);
  w.U32(l.generation);
}

LeaseReply DecodeLocateReply(Reader& r) {
  LeaseReply l = DecodeLeaseReply(r);
  l.generation = r.U32();
  return l;
}

void EncodeObjectInfo(Writer& w, const ObjectInfo& info) {
  w.U64(info.size);
  w.Str(info.group_id);
  w.U32(info.media);
  w.U32(info.active_leases);
  w.U8(static_cast<uint8_t>(info.state));
  w.I64(info.lease_expires_unix_ms);
  w.I64(info.last_access_unix_ms);
  w.Str(info.name_space);
  w.Str(info.owner);
  w.U32(info.owner_rank);
}

ObjectInfo DecodeObjectInfo(Reader& r) {
  ObjectInfo info;
  info.size = r.U64();
  info.group_id = std::string(r.Str());
  info.media = r.U32();
  info.active_leases = r.U32();
  info.state = static_cast<ReplicaState>(r.U8());
  info.lease_expires_unix_ms = r.I64();
  info.last_access_unix_ms = r.I64();
  info.name_space = std::string(r.Str());
  info.owner = std::string(r.Str());
  info.owner_rank = r.U32();
  return info;
}

void IdRequest::Encode(Writer& w) const { w.U64(id); }

Status IdRequest::Decode(Reader& r, std::string_view what) {
  id = r.U64();
  return r.Finish(what);
}

void RemoveAllRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.U8(force);
}

Status RemoveAllRequest::Decode(Reader& r) {
  tenant = r.Str();
  force = r.U8();
  return r.Finish("remove_all");
}

void RemoveAllReply::Encode(Writer& w) const {
  w.U64(removed);
  w.U64(skipped);
  w.U8(cleared);
}

Status RemoveAllReply::Decode(Reader& r) {
  removed = r.U64();
  skipped = r.U64();
  cleared = r.U8();
  return r.Finish("remove_all reply");
}

void ListKeysRequest::Encode(Writer& w) const {
  w.Str(tenant);
  w.Str(prefix);
  w.U32(limit);
}

Status ListKeysRequest::Decode(Reader& r) {
  tenant = r.Str();
  prefix = r.Str();
  limit = r.U32();
  return r.Finish("list_keys");
}

void ListKeysReply::Encode(Writer& w) const {
  w.U8(truncated);
  w.U32(static_cast<uint32_t>(keys.size()));
  for (std::string_view k : keys) w.Str(k);
}

Status ListKeysReply::Decode(Reader& r) {
  truncated = r.U8();
  const uint32_t n = r.Count(4);
  keys.clear();
  keys.reserve(n);
  for (uint32_t i = 0; i < n; ++i) keys.push_back(r.Str());
  return r.Finish("list_keys reply");
}

void EncodeStatuses(Writer& w, std::span<const Status> statuses) {
  w.U32(static_cast<uint32_t>(statuses.size()));
  for (const Status& st : statuses) w.ItemStatus(st);
}

}  // namespace tierkv::proto
