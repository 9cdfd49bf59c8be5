// tierkv::Client's batch gets: one BATCH_LOCATE / BATCH_LEASE (shared
// memory) or BATCH_GET (TCP) per chunk, every value handed to a sink that
// copies it where the caller wants it (buffers, scatter/gather regions,
// caller-allocated memory, strings).
#include "client/client_impl.h"

namespace tierkv {

void Client::Impl::BatchGetShm(std::span<const std::string_view> keys, std::string_view tenant,
                               const ValueSink& sink, std::vector<Status>& out, size_t base,
                               bool locate) {
  locate = locate && conn.generations();
  proto::BatchKeysRequest req;
  req.tenant = tenant;
  req.keys.assign(keys.begin(), keys.end());
  Writer w = Begin();
  req.Encode(w);
  if (Status st = Call(locate ? Opcode::kBatchLocate : Opcode::kBatchLease); !st.ok()) {
    FillAll(out, base, base + keys.size(), st);
    return;
  }
  Reader r(reply);
  const uint32_t n = r.U32();
  std::vector<uint64_t> ids;
  std::vector<size_t> idx;
  struct Located {
    size_t item = 0;
    uint64_t offset = 0;
    uint32_t generation = 0;
  };
  std::vector<Located> located;
  int64_t earliest_deadline = INT64_MAX;
  for (uint32_t i = 0; i < n && i < keys.size(); ++i) {
    Status st = r.ItemStatus();
    if (!st.ok()) {
      out[base + i] = st;
      continue;
    }
    const proto::LeaseReply l = locate ? proto::DecodeLocateReply(r) : proto::DecodeLeaseReply(r);
    if (!r.ok() || l.offset + l.size > conn.pool_size()) break;
    out[base + i] = sink(base + i, reinterpret_cast<const char*>(conn.pool() + l.offset), l.size);
    if (locate && l.lease_id == 0) {  // located, not leased (no lease id is 0)
      if (out[base + i].ok()) located.push_back({i, l.offset, l.generation});
      continue;
    }
    ids.push_back(l.lease_id);
    idx.push_back(i);
    earliest_deadline = std::min(earliest_deadline, l.deadline_nanos);
  }
  if (!r.done() || n != keys.size()) {
    FillAll(out, base, base + keys.size(),
            Status(Code::kProtocolError,
                   locate ? "malformed batch_locate reply" : "malformed batch_lease reply"));
    return;
  }
  std::vector<size_t> torn;
  if (!located.empty() && after_located_copy) after_located_copy();
  for (const Located& l : located) {
    if (!conn.CopyIntact(l.offset, l.generation)) torn.push_back(l.item);
  }
  if (!ids.empty()) {
    Writer rel = Begin();
    proto::BatchIdsRequest{ids}.Encode(rel);
    if (CopyFinishedWithinLease(earliest_deadline)) {
      // Every copy finished within its lease: release without waiting.
      if (Status st = conn.Post(Opcode::kBatchRelease, body); !st.ok()) {
        for (size_t j : idx) out[base + j] = st;
      }
    } else {
      Status st = Call(Opcode::kBatchRelease);
      Reader rr(reply);
      const uint32_t m = st.ok() ? rr.U32() : 0;
      for (size_t j = 0; j < idx.size(); ++j) {
        Status rs = !st.ok() ? st
                    : j < m  ? rr.ItemStatus()
                             : Status(Code::kProtocolError, "short batch_release reply");
        if (!rs.ok() && out[base + idx[j]].ok()) out[base + idx[j]] = rs;
      }
    }
  }
  if (!torn.empty()) RereadLeased(keys, torn, tenant, sink, out, base);
}

void Client::Impl::RereadLeased(std::span<const std::string_view> keys,
                                std::span<const size_t> items, std::string_view tenant,
                                const ValueSink& sink, std::vector<Status>& out, size_t base) {
  std::vector<std::string_view> again;
  for (size_t i : items) again.push_back(keys[i]);
  std::vector<Status> got(again.size());
  const ValueSink to_item = [&](size_t j, const char* data, size_t size) {
    return sink(base + items[j], data, size);
  };
  BatchGetShm(again, tenant, to_item, got, 0, /*locate=*/false);
  for (size_t j = 0; j < items.size(); ++j) out[base + items[j]] = got[j];
}

// Returns how many leading items were answered; the rest hit the reply limit.
size_t Client::Impl::BatchGetInline(std::span<const std::string_view> keys, std::string_view tenant,
                                    const ValueSink& sink, std::vector<Status>& out, size_t base) {
  proto::BatchKeysRequest req;
  req.tenant = tenant;
  req.keys.assign(keys.begin(), keys.end());
  Writer w = Begin();
  req.Encode(w);
  if (Status st = Call(Opcode::kBatchGet); !st.ok()) {
    FillAll(out, base, base + keys.size(), st);
    return keys.size();
  }
  Reader r(reply);
  const uint32_t n = r.U32();
  // The manager answers RETRY for every item after the one that filled its
  // reply; those are asked for again by the caller's loop.
  size_t answered = keys.size();
  for (uint32_t i = 0; i < n && i < keys.size(); ++i) {
    Status st = r.ItemStatus();
    if (st.code() == Code::kRetry) {
      answered = std::min<size_t>(answered, i);
      continue;
    }
    if (!st.ok()) {
      out[base + i] = st;
      continue;
    }
    std::string_view v = r.Str();
    out[base + i] = sink(base + i, v.data(), v.size());
  }
  if (!r.done() || n != keys.size()) {
    FillAll(out, base, base + keys.size(),
            Status(Code::kProtocolError, "malformed batch_get reply"));
    return keys.size();
  }
  return std::max<size_t>(answered, 1);
}

std::vector<Status> Client::Impl::BatchGetAll(std::span<const std::string_view> keys,
                                              std::string_view tenant, const ValueSink& sink,
                                              uint64_t* bytes) {
  const int64_t start = MonoNanos();
  std::vector<Status> out(keys.size());
  size_t i = 0;
  while (i < keys.size()) {
    const size_t n = std::min<size_t>(MaxBatch(), keys.size() - i);
    if (conn.shared_memory()) {
      BatchGetShm(keys.subspan(i, n), tenant, sink, out, i);
      i += n;
    } else {
      i += BatchGetInline(keys.subspan(i, n), tenant, sink, out, i);
    }
  }
  Account(TransferStats::kBatchGet, *bytes, start);
  return out;
}

std::vector<Result<size_t>> Client::BatchGet(std::span<const GetItem> items,
                                             std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string_view> keys;
  keys.reserve(items.size());
  for (const GetItem& it : items) keys.push_back(it.key);
  std::vector<size_t> sizes(items.size(), 0);
  uint64_t bytes = 0;
  std::vector<Region> regions(items.size());
  std::vector<bool> exact(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    regions[i] = {items[i].buffer, items[i].capacity};
    exact[i] = items[i].exact_size;
  }
  std::vector<Status> st = impl_->BatchGetRegistered(
      keys, tenant, [&](size_t i) { return std::span<const Region>(&regions[i], 1); }, exact,
      [&](size_t i, const char* data, size_t size) {
        if (items[i].exact_size && size != items[i].capacity) {
          return InvalidArgument("the value is " + std::to_string(size) + " bytes, not the " +
                                 std::to_string(items[i].capacity) + " asked (exact size)");
        }
        if (size > items[i].capacity) return SizeMismatch(size, items[i].capacity);
        std::memcpy(items[i].buffer, data, size);
        sizes[i] = size;
        bytes += size;
        return Status::Ok();
      },
      sizes, &bytes);
  return WithSizes(st, sizes);
}

std::vector<Result<size_t>> Client::BatchGetParts(std::span<const GetPartsItem> items,
                                                  std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string_view> keys;
  std::vector<size_t> wanted(items.size());
  keys.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    keys.push_back(items[i].key);
    wanted[i] = TotalSize(items[i].parts);
  }
  uint64_t bytes = 0;
  std::vector<size_t> sizes(items.size(), 0);
  std::vector<Status> st = impl_->BatchGetRegistered(
      keys, tenant, [&](size_t i) { return items[i].parts; }, std::vector<bool>(items.size(), true),
      [&](size_t i, const char* data, size_t size) {
        if (size != wanted[i]) return PartsMismatch(size, wanted[i]);
        Scatter(data, items[i].parts);
        bytes += size;
        return Status::Ok();
      },
      sizes, &bytes);
  return WithSizes(st, wanted);
}

Status Client::PutParts(std::string_view key, std::span<const ConstRegion> parts,
                        const WriteOptions& options, bool upsert) {
  const PutPartsItem item{key, parts, options.group_id};
  return BatchPutParts(std::span<const PutPartsItem>(&item, 1), options.tenant, upsert)[0];
}

Result<size_t> Client::GetParts(std::string_view key, std::span<const Region> parts,
                                std::string_view tenant) {
  const GetPartsItem item{key, parts};
  return BatchGetParts(std::span<const GetPartsItem>(&item, 1), tenant)[0];
}

std::vector<Result<size_t>> Client::BatchGet(std::span<const std::string_view> keys,
                                             const AllocateItem& allocate,
                                             std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<size_t> sizes(keys.size(), 0);
  uint64_t bytes = 0;
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        Status copied = CopyAllocated([&](size_t n) { return allocate(i, n); }, data, size);
        if (copied.ok()) {
          sizes[i] = size;
          bytes += size;
        }
        return copied;
      },
      &bytes);
  return WithSizes(st, sizes);
}

std::vector<Result<std::string>> Client::BatchGet(std::span<const std::string_view> keys,
                                                  std::string_view tenant) {
  std::vector<std::string> values(keys.size());
  std::vector<Result<size_t>> got = BatchGet(
      keys,
      [&](size_t i, size_t size) -> void* {
        values[i].resize(size);
        return values[i].data();
      },
      tenant);
  std::vector<Result<std::string>> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(got[i].ok() ? Result<std::string>(std::move(values[i]))
                              : Result<std::string>(got[i].status()));
  }
  return out;
}

}  // namespace tierkv
