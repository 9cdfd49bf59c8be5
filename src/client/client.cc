// tierkv::Client: calls encoded onto a Connection. Shared-memory paths (alloc /
// copy / commit, lease / copy / release) when the pool is mapped, inline bytes
// otherwise.
#include "tierkv/client.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <mutex>

#include "client/client_test_peer.h"
#include "client/connection.h"
#include "protocol/codec.h"
#include "protocol/messages.h"

namespace tierkv {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

namespace {

// Bytes a batch frame needs besides the values themselves, per item and fixed.
constexpr size_t kItemOverhead = 32;
constexpr size_t kFrameOverhead = 256;

// The manager never reuses a leased range before the lease's deadline (on
// CLOCK_MONOTONIC, which every process of a host shares). A copy that finished
// before the deadline is therefore intact, and the release need not be waited
// for. The margin absorbs the time between the copy's end and this check.
constexpr int64_t kLeaseMarginNanos = 200'000;

bool CopyFinishedWithinLease(int64_t deadline_nanos) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  return now + kLeaseMarginNanos < deadline_nanos;
}

Status SizeMismatch(size_t value, size_t capacity) {
  return Status(Code::kTooLarge, "buffer of " + std::to_string(capacity) +
                                     " bytes is smaller than the value (" + std::to_string(value) +
                                     " bytes)");
}

size_t TotalSize(std::span<const ConstRegion> parts) {
  size_t n = 0;
  for (const ConstRegion& p : parts) n += p.size;
  return n;
}

size_t TotalSize(std::span<const Region> parts) {
  size_t n = 0;
  for (const Region& p : parts) n += p.size;
  return n;
}

// Copies `size` bytes (the parts' total) into the parts, in order.
void Scatter(const char* data, std::span<const Region> parts) {
  for (const Region& p : parts) {
    std::memcpy(p.data, data, p.size);
    data += p.size;
  }
}

// Copies `size` bytes from `data` into the memory `allocate` gives for them.
Status CopyAllocated(const std::function<void*(size_t)>& allocate, const void* data, size_t size) {
  void* dst = allocate(size);
  if (dst == nullptr) {
    return Status(Code::kNoSpace, "no memory for a value of " + std::to_string(size) + " bytes");
  }
  std::memcpy(dst, data, size);
  return Status::Ok();
}

// Per item: its size where its status is OK, else the status.
std::vector<Result<size_t>> WithSizes(const std::vector<Status>& st,
                                      const std::vector<size_t>& sizes) {
  std::vector<Result<size_t>> out;
  out.reserve(st.size());
  for (size_t i = 0; i < st.size(); ++i) {
    out.push_back(st[i].ok() ? Result<size_t>(sizes[i]) : Result<size_t>(st[i]));
  }
  return out;
}

// Fails every entry of `out` that is still unset with `st` (a call-level error).
template <typename R>
void FillAll(std::vector<R>& out, size_t from, size_t to, const Status& st) {
  for (size_t i = from; i < to; ++i) out[i] = R(st);
}

}  // namespace

// Client-side figures of the batch calls, reported to the manager about once a
// second (posted, no reply awaited) for its memcache_bandwidth_* metrics.
class TransferStats {
 public:
  enum Op { kBatchPut = 0, kBatchGet = 1, kBatchExist = 2 };
  void Record(Op op, uint64_t bytes, double seconds) {
    Accum& a = ops_[op];
    a.window_bytes += bytes;
    a.window_seconds += seconds;
    a.latencies.push_back(seconds);
    a.cum_bytes += bytes;
    a.cum_seconds += seconds;
    a.used = true;
  }
  // A report when the window is a second old (the window then restarts).
  bool Due(int64_t now_ns) {
    if (window_start_ns_ == 0) window_start_ns_ = now_ns;
    return now_ns - window_start_ns_ >= 1'000'000'000;
  }
  proto::ReportMetricsRequest TakeReport(uint32_t rank, int64_t now_ns) {
    proto::ReportMetricsRequest req;
    req.rank = rank;
    const double wall = std::max(1e-9, (now_ns - window_start_ns_) / 1e9);
    for (int i = 0; i < 3; ++i) {
      Accum& a = ops_[i];
      if (!a.used) continue;
      proto::OpWindow w;
      w.op = static_cast<uint8_t>(i);
      w.window_bytes = a.window_bytes;
      w.window_duration_ms = static_cast<uint64_t>(a.window_seconds * 1000);
      w.bytes_per_sec = a.window_bytes / wall;
      if (!a.latencies.empty()) {
        std::vector<double>& v = a.latencies;
        std::sort(v.begin(), v.end());
        auto pct = [&](double p) {
          return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
        };
        w.p50_s = pct(0.50);
        w.p90_s = pct(0.90);
        w.p99_s = pct(0.99);
        w.avg_s = a.window_seconds / v.size();
      }
      w.cum_bytes = a.cum_bytes;
      w.cum_duration_ms = static_cast<uint64_t>(a.cum_seconds * 1000);
      req.ops.push_back(w);
      a.window_bytes = 0;
      a.window_seconds = 0;
      a.latencies.clear();
    }
    window_start_ns_ = now_ns;
    return req;
  }

 private:
  struct Accum {
    uint64_t window_bytes = 0;
    double window_seconds = 0;
    std::vector<double> latencies;
    uint64_t cum_bytes = 0;
    double cum_seconds = 0;
    bool used = false;
  };
  std::array<Accum, 3> ops_;
  int64_t window_start_ns_ = 0;
};

int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class Client::Impl {
 public:
  Impl(proto::Address address, const ClientOptions& options) : conn(std::move(address), options) {}
  std::mutex mu;
  Connection conn;
  std::string body;
  std::string reply;
  TransferStats stats;
  uint32_t rank = 0;
  bool pipeline_commits = false;
  // Test seam: runs after a lease-free copy, before its generation check.
  std::function<void()> after_located_copy;

  // Records one batch call and, about once a second, posts the report.
  void Account(TransferStats::Op op, uint64_t bytes, int64_t start_ns) {
    const int64_t now = MonoNanos();
    stats.Record(op, bytes, (now - start_ns) / 1e9);
    if (!stats.Due(now)) return;
    std::string report;
    Writer w(&report);
    stats.TakeReport(rank, now).Encode(w);
    (void)conn.Post(Opcode::kReportMetrics, report);
  }

  Status Call(Opcode op) { return conn.Call(op, body, &reply); }
  Writer Begin() {
    body.clear();
    return Writer(&body);
  }
  uint32_t MaxBatch() const { return std::max<uint32_t>(1, conn.limits().max_batch); }
  size_t MaxFrame() const { return conn.limits().max_frame_bytes; }

  Status PutOne(std::string_view key, const void* data, size_t size, const WriteOptions& o,
                bool upsert);
  // `locate`: ask for a LOCATE when the generation table is mapped (a copy
  // found torn is read again with locate false, under a lease).
  Result<size_t> GetOne(std::string_view key, void* buffer, size_t capacity,
                        std::string_view tenant, const Client::Allocate* allocate,
                        bool locate = true);
  // `sizes`: each item's total size.
  void BatchPutChunk(std::span<const PutPartsItem> items, std::span<const size_t> sizes,
                     std::string_view tenant, bool upsert, Status* out);
  std::vector<Status> BatchPutAll(std::span<const PutPartsItem> items, std::string_view tenant,
                                  bool upsert);
  // Receives item `i`'s value (valid only during the call); its status becomes
  // the item's result.
  using ValueSink = std::function<Status(size_t i, const char* data, size_t size)>;
  void BatchGetShm(std::span<const std::string_view> keys, std::string_view tenant,
                   const ValueSink& sink, std::vector<Status>& out, size_t base,
                   bool locate = true);
  // Reads again, under leases, the items of a BatchGetShm chunk whose
  // lease-free copies were found torn (`items`: their indexes in `keys`). The
  // sink runs again for them (the transfer statistics count both copies).
  void RereadLeased(std::span<const std::string_view> keys, std::span<const size_t> items,
                    std::string_view tenant, const ValueSink& sink, std::vector<Status>& out,
                    size_t base);
  size_t BatchGetInline(std::span<const std::string_view> keys, std::string_view tenant,
                        const ValueSink& sink, std::vector<Status>& out, size_t base);
  // Chunks `keys` by the batch limit; `*bytes` (updated by the sink) is
  // accounted in the transfer statistics.
  std::vector<Status> BatchGetAll(std::span<const std::string_view> keys, std::string_view tenant,
                                  const ValueSink& sink, uint64_t* bytes);
  template <typename R, typename Fn>
  std::vector<R> KeyBatch(Opcode op, std::span<const std::string_view> keys,
                          std::string_view tenant, Fn decode_item, uint8_t lookup_flags = 0);
};

uint8_t LookupFlags(const LookupOptions& o) { return o.local_only ? proto::kLookupLocalOnly : 0; }

Result<std::unique_ptr<Client>> Client::Connect(std::string_view address,
                                                const ClientOptions& options) {
  Result<proto::Address> addr = proto::ParseAddress(address);
  if (!addr.ok()) return addr.status();
  auto impl = std::make_unique<Impl>(*addr, options);
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
        a.U64(grant.alloc_id);
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
    c.U64(grant.alloc_id);
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
    rel.U64(lease.lease_id);
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
  const uint8_t flags = upsert ? proto::kPutUpsert : 0;
  if (conn.shared_memory()) {
    proto::BatchAllocRequest req;
    req.tenant = tenant;
    for (size_t i = 0; i < items.size(); ++i) {
      req.items.push_back({items[i].key, sizes[i], items[i].group_id, flags});
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
      if (!r.ok() || g.offset + sizes[i] > conn.pool_size()) break;
      char* dst = reinterpret_cast<char*>(conn.pool() + g.offset);
      for (const ConstRegion& part : items[i].parts) {
        std::memcpy(dst, part.data, part.size);
        dst += part.size;
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
// Batch gets. Both public forms run the same path: one BATCH_LEASE (shared
// memory) or BATCH_GET (TCP) per chunk, every value handed to a sink that
// copies it where the caller wants it.

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
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        if (size > items[i].capacity) return SizeMismatch(size, items[i].capacity);
        if (items[i].exact_size && size != items[i].capacity) {
          return InvalidArgument("the value is " + std::to_string(size) + " bytes, not the " +
                                 std::to_string(items[i].capacity) + " asked (exact size)");
        }
        std::memcpy(items[i].buffer, data, size);
        sizes[i] = size;
        bytes += size;
        return Status::Ok();
      },
      &bytes);
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
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        if (size != wanted[i]) {
          return InvalidArgument("the value is " + std::to_string(size) +
                                 " bytes, not the parts' total of " + std::to_string(wanted[i]));
        }
        Scatter(data, items[i].parts);
        bytes += size;
        return Status::Ok();
      },
      &bytes);
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
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> values(keys.size());
  uint64_t bytes = 0;
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        values[i].assign(data, size);
        bytes += size;
        return Status::Ok();
      },
      &bytes);
  std::vector<Result<std::string>> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(st[i].ok() ? Result<std::string>(std::move(values[i]))
                             : Result<std::string>(st[i]));
  }
  return out;
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
  proto::EncodeRemoveAllRequest(w, {tenant, static_cast<uint8_t>(force ? 1 : 0)});
  if (Status st = impl_->Call(Opcode::kRemoveAll); !st.ok()) return st;
  Reader r(impl_->reply);
  RemoveAllStats s;
  s.removed = r.U64();
  s.skipped = r.U64();
  s.cleared = r.U8() != 0;
  if (Status st = r.Finish("remove_all reply"); !st.ok()) return st;
  return s;
}

Result<KeyList> Client::ListKeys(std::string_view tenant, std::string_view prefix, uint32_t limit) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Writer w = impl_->Begin();
  proto::EncodeListKeysRequest(w, {tenant, prefix, limit});
  if (Status st = impl_->Call(Opcode::kListKeys); !st.ok()) return st;
  Reader r(impl_->reply);
  KeyList list;
  list.truncated = r.U8() != 0;
  const uint32_t n = r.Count(4);
  list.keys.reserve(n);
  for (uint32_t i = 0; i < n; ++i) list.keys.emplace_back(r.Str());
  if (Status st = r.Finish("list_keys reply"); !st.ok()) return st;
  return list;
}

}  // namespace tierkv

namespace tierkv {

void ClientTestPeer::SetAfterLocatedCopy(Client& client, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(client.impl_->mu);
  client.impl_->after_located_copy = std::move(hook);
}

}  // namespace tierkv
