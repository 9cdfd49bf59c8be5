// tierkv::Client: calls encoded onto a Connection. Shared-memory paths (alloc /
// copy / commit, lease / copy / release) when the pool is mapped, inline bytes
// otherwise. Batch gets are in client_get.cc.
#include "tierkv/client.h"

#include "client/client_impl.h"
#include "client/client_test_peer.h"

namespace tierkv {

uint8_t LookupFlags(const LookupOptions& o) { return o.local_only ? proto::kLookupLocalOnly : 0; }

Result<std::unique_ptr<Client>> Client::Connect(std::string_view address,
                                                const ClientOptions& options) {
  Result<proto::Address> addr = proto::ParseAddress(address);
  if (!addr.ok()) return addr.status();
  auto impl = std::make_unique<Impl>(*addr, options);
  if (Status st = impl->OpenDevice(options); !st.ok()) return st;
  impl->device_puts_in_hbm = options.device_puts_in_hbm;
  impl->rank = options.rank;
  impl->pipeline_commits = options.pipeline_commits;
  if (Status st = impl->conn.Open(); !st.ok()) return st;
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

bool Client::shared_memory() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->conn.shared_memory();
}
uint64_t Client::max_object_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->conn.limits().max_object_bytes;
}
uint32_t Client::max_key_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->conn.limits().max_key_bytes;
}

// ---------------------------------------------------------------------------
// Single puts and gets.

Status Client::Impl::PutOne(std::string_view key, const void* data, size_t size,
                            const WriteOptions& o, bool upsert) {
  const uint8_t flags = upsert ? proto::kPutUpsert : 0;
  if (conn.shared_memory()) {
    Writer w = Begin();
    proto::AllocRequest{o.tenant, key, size, o.group_id, flags}.Encode(w);
    // Pipelined: this ALLOC overtakes the previous put's unread commit answer.
    Status st =
        pipeline_commits ? conn.CallOverlapped(Opcode::kAlloc, body, &reply) : Call(Opcode::kAlloc);
    if (Status earlier = conn.TakeDeferred(); !earlier.ok()) {
      // The previous put failed: report it, and undo this one's grant.
      Reader r(reply);
      const proto::AllocReply grant = proto::DecodeAllocReply(r);
      if (st.ok() && r.ok()) {
        Writer a = Begin();
        proto::IdRequest{grant.alloc_id}.Encode(a);
        (void)conn.Post(Opcode::kAbort, body);
      }
      return earlier;
    }
    if (!st.ok()) return st;
    Reader r(reply);
    const proto::AllocReply grant = proto::DecodeAllocReply(r);
    if (!r.ok() || grant.offset + size > conn.pool_size()) {
      return Status(Code::kProtocolError, "malformed alloc reply");
    }
    std::memcpy(conn.pool() + grant.offset, data, size);
    Writer c = Begin();
    proto::IdRequest{grant.alloc_id}.Encode(c);
    if (pipeline_commits) {
      return conn.PostChecked(Opcode::kCommit, body, "the commit of '" + std::string(key) + "'");
    }
    return Call(Opcode::kCommit);
  }
  if (size > conn.limits().max_object_bytes) {
    return Status(Code::kTooLarge, "value is " + std::to_string(size) +
                                       " bytes; the limit (max-object-bytes) is " +
                                       std::to_string(conn.limits().max_object_bytes));
  }
  if (size + key.size() + o.tenant.size() + o.group_id.size() + kFrameOverhead > MaxFrame()) {
    return Status(Code::kTooLarge, "value of " + std::to_string(size) +
                                       " bytes does not fit in one frame (max-frame-bytes " +
                                       std::to_string(MaxFrame()) + ")");
  }
  Writer w = Begin();
  proto::PutRequest{o.tenant, key, o.group_id, flags,
                    std::string_view(static_cast<const char*>(data), size)}
      .Encode(w);
  return Call(Opcode::kPut);
}

Status Client::Put(std::string_view key, const void* data, size_t size,
                   const WriteOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->PutOne(key, data, size, options, /*upsert=*/false);
}

Status Client::Flush() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->conn.Settle();
}

Status Client::Upsert(std::string_view key, const void* data, size_t size,
                      const WriteOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->PutOne(key, data, size, options, /*upsert=*/true);
}

// Copies into `buffer` (capacity bytes) or, when `allocate` is set, into the
// memory it returns for the value's size.
Result<size_t> Client::Impl::GetOne(std::string_view key, void* buffer, size_t capacity,
                                    std::string_view tenant, const Client::Allocate* allocate,
                                    bool locate) {
  Writer w = Begin();
  proto::KeyRequest{tenant, key}.Encode(w);
  if (conn.shared_memory()) {
    locate = locate && conn.generations();
    if (Status st = Call(locate ? Opcode::kLocate : Opcode::kLease); !st.ok()) return st;
    Reader r(reply);
    const proto::LeaseReply lease =
        locate ? proto::DecodeLocateReply(r) : proto::DecodeLeaseReply(r);
    if (!r.ok() || lease.offset + lease.size > conn.pool_size()) {
      return Status(Code::kProtocolError, "malformed lease reply");
    }
    Status copy_status;
    if (allocate != nullptr) {
      copy_status = CopyAllocated(*allocate, conn.pool() + lease.offset, lease.size);
    } else if (lease.size > capacity) {
      copy_status = SizeMismatch(lease.size, capacity);
    } else {
      std::memcpy(buffer, conn.pool() + lease.offset, lease.size);
    }
    if (locate && lease.lease_id == 0) {  // located, not leased (no lease id is 0)
      if (!copy_status.ok()) return copy_status;
      if (after_located_copy) after_located_copy();
      if (!conn.CopyIntact(lease.offset, lease.generation)) {
        return GetOne(key, buffer, capacity, tenant, allocate, /*locate=*/false);
      }
      return static_cast<size_t>(lease.size);
    }
    Writer rel = Begin();
    proto::IdRequest{lease.lease_id}.Encode(rel);
    if (CopyFinishedWithinLease(lease.deadline_nanos)) {
      // The copy is known good: release without waiting for the answer.
      if (Status st = conn.Post(Opcode::kRelease, body); !st.ok()) return st;
    } else if (Status st = Call(Opcode::kRelease); !st.ok() && copy_status.ok()) {
      return st;  // LEASE_EXPIRED: the range may have been reused; the copy is void
    }
    if (!copy_status.ok()) return copy_status;
    return static_cast<size_t>(lease.size);
  }
  if (Status st = Call(Opcode::kGet); !st.ok()) return st;
  Reader r(reply);
  std::string_view value = r.Str();
  if (Status st = r.Finish("get reply"); !st.ok()) return st;
  if (allocate != nullptr) {
    if (Status st = CopyAllocated(*allocate, value.data(), value.size()); !st.ok()) return st;
  } else if (value.size() > capacity) {
    return SizeMismatch(value.size(), capacity);
  } else {
    std::memcpy(buffer, value.data(), value.size());
  }
  return value.size();
}

Result<size_t> Client::Get(std::string_view key, void* buffer, size_t capacity,
                           std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->registrations.empty() && capacity > 0) {
    // Into registered memory: the manager writes the value there.
    std::vector<Status> out(1);
    std::vector<size_t> sizes(1, 0);
    uint64_t bytes = 0;
    const std::string_view keys[] = {key};
    const Region region{buffer, capacity};
    if (impl_
            ->GetIntoRegistered(
                keys, tenant, [&](size_t) { return std::span<const Region>(&region, 1); }, {false},
                out, sizes, &bytes)
            .empty()) {
      return out[0].ok() ? Result<size_t>(sizes[0]) : Result<size_t>(out[0]);
    }
  }
  return impl_->GetOne(key, buffer, capacity, tenant, nullptr);
}

Result<std::string> Client::Get(std::string_view key, std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string value;
  const Allocate into_string = [&](size_t size) -> void* {
    value.resize(size);
    return value.data();
  };
  Result<size_t> r = impl_->GetOne(key, nullptr, 0, tenant, &into_string);
  if (!r.ok()) return r.status();
  return value;
}

Result<size_t> Client::Get(std::string_view key, const Allocate& allocate,
                           std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->GetOne(key, nullptr, 0, tenant, &allocate);
}

// ---------------------------------------------------------------------------
// Batch puts.

// One round trip (or two over shared memory) for items that fit one frame.
void Client::Impl::BatchPutChunk(std::span<const PutPartsItem> items, std::span<const size_t> sizes,
                                 std::string_view tenant, bool upsert, Status* out) {
  const bool to_hbm = device_parts && device_puts_in_hbm && HbmReady();
  const uint8_t flags = upsert ? proto::kPutUpsert : 0;
  if (conn.shared_memory()) {
    proto::BatchAllocRequest req;
    req.tenant = tenant;
    for (size_t i = 0; i < items.size(); ++i) {
      req.items.push_back({items[i].key, sizes[i], items[i].group_id,
                           static_cast<uint8_t>(flags | (to_hbm ? proto::kPutHbm : 0))});
    }
    Writer w = Begin();
    req.Encode(w);
    if (Status st = Call(Opcode::kBatchAlloc); !st.ok()) {
      std::fill(out, out + items.size(), st);
      return;
    }
    Reader r(reply);
    const uint32_t n = r.U32();
    std::vector<uint64_t> ids;
    std::vector<size_t> idx;
    for (uint32_t i = 0; i < n && i < items.size(); ++i) {
      out[i] = r.ItemStatus();
      if (!out[i].ok()) continue;
      const proto::AllocReply g = proto::DecodeAllocReply(r);
      Medium medium = Medium::kDram;
      uint32_t pool = 0;
      if (to_hbm && !proto::DecodePlacement(r, &medium, &pool)) break;
      if (!r.ok() || (medium == Medium::kDram && g.offset + sizes[i] > conn.pool_size())) break;
      Status copied =
          medium == Medium::kHbm
              ? GatherPartsToHbm(pool, g.offset, sizes[i], items[i].parts)
              : GatherParts(reinterpret_cast<char*>(conn.pool() + g.offset), items[i].parts);
      if (!copied.ok()) {
        out[i] = copied;  // not committed: the grant is given back
        Writer a = Begin();
        proto::IdRequest{g.alloc_id}.Encode(a);
        (void)conn.Post(Opcode::kAbort, body);
        continue;
      }
      ids.push_back(g.alloc_id);
      idx.push_back(i);
    }
    if (!r.done() || n != items.size()) {
      std::fill(out, out + items.size(),
                Status(Code::kProtocolError, "malformed batch_alloc reply"));
      return;
    }
    if (ids.empty()) return;
    Writer c = Begin();
    proto::BatchIdsRequest{ids}.Encode(c);
    Status st = Call(Opcode::kBatchCommit);
    Reader cr(reply);
    const uint32_t m = st.ok() ? cr.U32() : 0;
    for (size_t j = 0; j < idx.size(); ++j) {
      out[idx[j]] = !st.ok() ? st
                    : j < m  ? cr.ItemStatus()
                             : Status(Code::kProtocolError, "short batch_commit reply");
    }
    return;
  }
  if (device_parts) {
    // The connection was lost during a device put (its parts are GPU memory,
    // never read by the host): the rest is not sent.
    std::fill(out, out + items.size(),
              Status(Code::kUnavailable, "the connection to the manager was lost during the put"));
    return;
  }
  // Inline: every part of every item as a view, each item's span into them.
  std::vector<std::string_view> views;
  for (const PutPartsItem& it : items) {
    for (const ConstRegion& part : it.parts) {
      views.emplace_back(static_cast<const char*>(part.data), part.size);
    }
  }
  proto::BatchPutRequest req;
  req.tenant = tenant;
  size_t at = 0;
  for (const PutPartsItem& it : items) {
    proto::BatchPutRequest::Item item{it.key, it.group_id, flags, {}, {}};
    item.parts = std::span<const std::string_view>(views).subspan(at, it.parts.size());
    at += it.parts.size();
    req.items.push_back(item);
  }
  Writer w = Begin();
  req.Encode(w);
  if (Status st = Call(Opcode::kBatchPut); !st.ok()) {
    std::fill(out, out + items.size(), st);
    return;
  }
  Reader r(reply);
  const uint32_t n = r.U32();
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = i < n ? r.ItemStatus() : Status(Code::kProtocolError, "short batch_put reply");
  }
}

std::vector<Status> Client::Impl::BatchPutAll(std::span<const PutPartsItem> items,
                                              std::string_view tenant, bool upsert) {
  const int64_t start = MonoNanos();
  std::vector<Status> out(items.size());
  std::vector<size_t> sizes(items.size());
  for (size_t k = 0; k < items.size(); ++k) sizes[k] = TotalSize(items[k].parts);
  const bool inline_bytes = !conn.shared_memory();
  size_t i = 0;
  while (i < items.size()) {
    // A chunk ends at the batch limit or, inline, before the frame limit.
    size_t j = i;
    size_t bytes = kFrameOverhead;
    while (j < items.size() && j - i < MaxBatch()) {
      const size_t item_bytes = kItemOverhead + items[j].key.size() + items[j].group_id.size() +
                                (inline_bytes ? sizes[j] : 0);
      if (j > i && bytes + item_bytes > MaxFrame()) break;
      bytes += item_bytes;
      ++j;
    }
    if (inline_bytes && bytes > MaxFrame()) {
      out[i] = Status(Code::kTooLarge,
                      "value of " + std::to_string(sizes[i]) + " bytes does not fit in one frame");
      ++i;
      continue;
    }
    BatchPutChunk(items.subspan(i, j - i), std::span<const size_t>(sizes).subspan(i, j - i), tenant,
                  upsert, out.data() + i);
    i = j;
  }
  uint64_t bytes = 0;
  for (size_t k = 0; k < items.size(); ++k) bytes += out[k].ok() ? sizes[k] : 0;
  Account(TransferStats::kBatchPut, bytes, start);
  return out;
}

std::vector<Status> Client::BatchPut(std::span<const PutItem> items, std::string_view tenant,
                                     bool upsert) {
  std::vector<ConstRegion> regions(items.size());
  std::vector<PutPartsItem> parts(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    regions[i] = {items[i].data, items[i].size};
    parts[i] = {items[i].key, std::span<const ConstRegion>(&regions[i], 1), items[i].group_id};
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->BatchPutAll(parts, tenant, upsert);
}

std::vector<Status> Client::BatchPutParts(std::span<const PutPartsItem> items,
                                          std::string_view tenant, bool upsert) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->BatchPutAll(items, tenant, upsert);
}

// ---------------------------------------------------------------------------
// Keyed lookups and removal.

template <typename R, typename Fn>
std::vector<R> Client::Impl::KeyBatch(Opcode op, std::span<const std::string_view> keys,
                                      std::string_view tenant, Fn decode_item,
                                      uint8_t lookup_flags) {
  std::vector<R> out(keys.size(), R(Status(Code::kInternal, "not answered")));
  for (size_t i = 0; i < keys.size();) {
    const size_t n = std::min<size_t>(MaxBatch(), keys.size() - i);
    proto::BatchKeysRequest req;
    req.tenant = tenant;
    req.keys.assign(keys.begin() + i, keys.begin() + i + n);
    req.lookup_flags = lookup_flags;
    Writer w = Begin();
    req.Encode(w);
    if (Status st = Call(op); !st.ok()) {
      FillAll(out, i, i + n, st);
    } else {
      Reader r(reply);
      const uint32_t m = r.U32();
      for (size_t j = 0; j < n && j < m; ++j) {
        Status st = r.ItemStatus();
        out[i + j] = st.ok() ? decode_item(r) : R(st);
      }
      if (!r.done() || m != n) {
        FillAll(out, i, i + n, Status(Code::kProtocolError, "malformed batch reply"));
      }
    }
    i += n;
  }
  return out;
}

Status Client::Exist(std::string_view key, std::string_view tenant, const LookupOptions& lookup) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::KeyRequest{tenant, key, LookupFlags(lookup)}.Encode(w);
  return impl_->Call(Opcode::kExist);
}

std::vector<Status> Client::BatchExist(std::span<const std::string_view> keys,
                                       std::string_view tenant, const LookupOptions& lookup) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const int64_t start = MonoNanos();
  std::vector<Status> out = impl_->KeyBatch<Status>(
      Opcode::kBatchExist, keys, tenant, [](Reader&) { return Status::Ok(); }, LookupFlags(lookup));
  impl_->Account(TransferStats::kBatchExist, 0, start);
  return out;
}

Result<ObjectInfo> Client::Query(std::string_view key, std::string_view tenant,
                                 const LookupOptions& lookup) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::KeyRequest{tenant, key, LookupFlags(lookup)}.Encode(w);
  if (Status st = impl_->Call(Opcode::kQuery); !st.ok()) return st;
  Reader r(impl_->reply);
  ObjectInfo info = proto::DecodeObjectInfo(r);
  if (Status st = r.Finish("query reply"); !st.ok()) return st;
  return info;
}

std::vector<Result<ObjectInfo>> Client::BatchQuery(std::span<const std::string_view> keys,
                                                   std::string_view tenant,
                                                   const LookupOptions& lookup) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->KeyBatch<Result<ObjectInfo>>(
      Opcode::kBatchQuery, keys, tenant,
      [](Reader& r) { return Result<ObjectInfo>(proto::DecodeObjectInfo(r)); },
      LookupFlags(lookup));
}

Status Client::Remove(std::string_view key, std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::KeyRequest{tenant, key}.Encode(w);
  return impl_->Call(Opcode::kRemove);
}

std::vector<Status> Client::BatchRemove(std::span<const std::string_view> keys,
                                        std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->KeyBatch<Status>(Opcode::kBatchRemove, keys, tenant,
                                 [](Reader&) { return Status::Ok(); });
}

Result<RemoveAllStats> Client::RemoveAll(std::string_view tenant, bool force) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::RemoveAllRequest{tenant, static_cast<uint8_t>(force ? 1 : 0)}.Encode(w);
  if (Status st = impl_->Call(Opcode::kRemoveAll); !st.ok()) return st;
  Reader r(impl_->reply);
  proto::RemoveAllReply rep;
  if (Status st = rep.Decode(r); !st.ok()) return st;
  return RemoveAllStats{rep.removed, rep.skipped, rep.cleared != 0};
}

Result<KeyList> Client::ListKeys(std::string_view tenant, std::string_view prefix, uint32_t limit) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::ListKeysRequest{tenant, prefix, limit}.Encode(w);
  if (Status st = impl_->Call(Opcode::kListKeys); !st.ok()) return st;
  Reader r(impl_->reply);
  proto::ListKeysReply rep;
  if (Status st = rep.Decode(r); !st.ok()) return st;
  KeyList list;
  list.truncated = rep.truncated != 0;
  list.keys.assign(rep.keys.begin(), rep.keys.end());
  return list;
}

}  // namespace tierkv

namespace tierkv {

void ClientTestPeer::SetAfterLocatedCopy(Client& client, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(client.impl_->mu);
  client.impl_->after_located_copy = std::move(hook);
}

void ClientTestPeer::SetDevice(Client& client, std::unique_ptr<Device> device) {
  std::lock_guard<std::mutex> lock(client.impl_->mu);
  client.impl_->device = std::move(device);
}

}  // namespace tierkv
