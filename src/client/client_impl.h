// Client::Impl and what the client's .cc files share: the connection, the
// request and reply buffers, the transfer statistics and the copy helpers.
// Internal to the client library (src/client); not a public header.
#ifndef TIERKV_CLIENT_CLIENT_IMPL_H_
#define TIERKV_CLIENT_CLIENT_IMPL_H_

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "client/connection.h"
#include "device/device.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "tierkv/client.h"

namespace tierkv {
namespace client_internal {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

// Bytes a batch frame needs besides the values themselves, per item and fixed.
constexpr size_t kItemOverhead = 32;
constexpr size_t kFrameOverhead = 256;

// The manager never reuses a leased range before the lease's deadline (on
// CLOCK_MONOTONIC, which every process of a host shares). A copy that finished
// before the deadline is therefore intact, and the release need not be waited
// for. The margin absorbs the time between the copy's end and this check.
constexpr int64_t kLeaseMarginNanos = 200'000;

inline bool CopyFinishedWithinLease(int64_t deadline_nanos) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  return now + kLeaseMarginNanos < deadline_nanos;
}

inline Status SizeMismatch(size_t value, size_t capacity) {
  return Status(Code::kTooLarge, "buffer of " + std::to_string(capacity) +
                                     " bytes is smaller than the value (" + std::to_string(value) +
                                     " bytes)");
}

// A value whose size is not its parts' total: nothing is copied.
inline Status PartsMismatch(size_t value, size_t parts) {
  return InvalidArgument("the value is " + std::to_string(value) +
                         " bytes, not the parts' total of " + std::to_string(parts));
}

inline size_t TotalSize(std::span<const ConstRegion> parts) {
  size_t n = 0;
  for (const ConstRegion& p : parts) n += p.size;
  return n;
}

inline size_t TotalSize(std::span<const Region> parts) {
  size_t n = 0;
  for (const Region& p : parts) n += p.size;
  return n;
}

// Copies `size` bytes (the parts' total) into the parts, in order.
inline void Scatter(const char* data, std::span<const Region> parts) {
  for (const Region& p : parts) {
    std::memcpy(p.data, data, p.size);
    data += p.size;
  }
}

// Copies `size` bytes from `data` into the memory `allocate` gives for them.
inline Status CopyAllocated(const std::function<void*(size_t)>& allocate, const void* data,
                            size_t size) {
  void* dst = allocate(size);
  if (dst == nullptr) {
    return Status(Code::kNoSpace, "no memory for a value of " + std::to_string(size) + " bytes");
  }
  std::memcpy(dst, data, size);
  return Status::Ok();
}

// Per item: its size where its status is OK, else the status.
inline std::vector<Result<size_t>> WithSizes(const std::vector<Status>& st,
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

inline int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

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

}  // namespace client_internal

// The client's .cc files use these unqualified.
using client_internal::CopyAllocated;
using client_internal::CopyFinishedWithinLease;
using client_internal::FillAll;
using client_internal::kFrameOverhead;
using client_internal::kItemOverhead;
using client_internal::MonoNanos;
using client_internal::Opcode;
using client_internal::PartsMismatch;
using client_internal::Reader;
using client_internal::Scatter;
using client_internal::SizeMismatch;
using client_internal::TotalSize;
using client_internal::TransferStats;
using client_internal::WithSizes;
using client_internal::Writer;

// The state behind a Client: one connection and its buffers, under `mu`.
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
  // GPU memory copies (ClientOptions::device_copies); null without. One
  // device does every copy: the driver's unified addressing resolves a part
  // on any GPU of the process.
  std::unique_ptr<DeviceRuntime> device_runtime;
  std::unique_ptr<Device> device;
  std::string device_runtime_kind;  // "cuda" or "host"
  // True while a put's parts are device addresses (BatchPutFromDevice).
  bool device_parts = false;
  bool device_puts_in_hbm = true;  // ClientOptions::device_puts_in_hbm
  // The manager's HBM pools as this process maps them (by pool index), for
  // the connection incarnation they were mapped on.
  std::vector<DevicePtr> hbm_bases;
  uint64_t hbm_incarnation = 0;

  // Registered buffers (RegisterBuffer), by the address they start at.
  struct Registration {
    uint64_t handle = 0;  // RegisteredBuffer::id, unique in the process
    int fd = -1;          // the memfd, passed again after a reconnect
    uint64_t inode = 0;
    uint8_t* data = nullptr;
    size_t size = 0;
    std::shared_ptr<void> mapping;
    uint64_t region = 0;                  // the manager's id, on connection `incarnation`
    std::optional<uint64_t> incarnation;  // the connection it was asked on (none yet)
    bool refused = false;                 // the manager refused it on `incarnation`
  };
  std::map<uintptr_t, Registration> registrations;

  ~Impl() {
    CloseHbmImports();
    for (auto& [addr, r] : registrations) close(r.fd);
  }
  // REGISTER of `r` on the current connection, passing its memfd.
  Status Register(Registration& r);
  // Register(r) unless it was asked on this connection already. False when
  // the manager refused it (the plain path serves its gets then).
  bool EnsureRegistered(Registration& r);
  // The registration holding [p, p + n), or null.
  Registration* RegisteredAt(const void* p, size_t n);
  // Gets into registered memory: the items whose parts all lie in registered
  // buffers usable on this connection are answered by BATCH_GET_INTO (out[i],
  // sizes[i], *bytes); returns the indexes of the others, for the plain path.
  // `parts_of(i)` gives item i's memory, `exact[i]` whether the value must
  // fill it exactly.
  std::vector<size_t> GetIntoRegistered(
      std::span<const std::string_view> keys, std::string_view tenant,
      const std::function<std::span<const Region>(size_t)>& parts_of,
      const std::vector<bool>& exact, std::vector<Status>& out, std::vector<size_t>& sizes,
      uint64_t* bytes);
  // A batch get: GetIntoRegistered, then BatchGetAll for the rest (the sink
  // called with the items' own indexes).
  std::vector<Status> BatchGetRegistered(
      std::span<const std::string_view> keys, std::string_view tenant,
      const std::function<std::span<const Region>(size_t)>& parts_of,
      const std::vector<bool>& exact,
      const std::function<Status(size_t i, const char* data, size_t size)>& sink,
      std::vector<size_t>& sizes, uint64_t* bytes);
  // One BATCH_GET_INTO for items `idx` (their pieces in `pieces`, item j
  // owning counts[j] from its start), fitting one frame.
  void GetIntoChunk(std::span<const std::string_view> keys, std::string_view tenant,
                    std::span<const size_t> idx, const std::vector<bool>& exact,
                    std::span<const proto::GetIntoRequest::Piece> pieces,
                    std::span<const uint32_t> counts, std::vector<Status>& out,
                    std::vector<size_t>& sizes, uint64_t* bytes);
  // Maps the HBM pools the current connection's HELLO described (once per
  // incarnation). True when there are pools and every one is mapped: only
  // then are allocs and leases asked to use HBM.
  bool HbmReady();
  void CloseHbmImports();
  // Copies a leased value (in the DRAM pool, or HBM pool `pool`) into device
  // parts, in order. Errors: INVALID_ARGUMENT (not the parts' total size),
  // PROTOCOL_ERROR (a range outside the pool), IO_ERROR (the driver refused).
  Status CopyLeased(const proto::LeaseReply& l, Medium medium, uint32_t pool,
                    std::span<const DeviceRegion> parts);
  // Copies `src` (host memory, the parts' total) into device parts, in order.
  Status ScatterToDevice(const uint8_t* src, std::span<const DeviceRegion> parts);
  // Where `size` bytes at `offset` of HBM pool `pool` are mapped in this
  // process (mapping the pools again after a reconnect), or 0 when they are
  // not (a pool not mapped, a range outside it).
  DevicePtr HbmAddress(uint32_t pool, uint64_t offset, size_t size);
  // Copies a put's device parts, in order, into HBM pool `pool` at `offset`
  // (GPU to GPU). Errors: PROTOCOL_ERROR (a range outside the pool),
  // IO_ERROR (the driver refused).
  Status GatherPartsToHbm(uint32_t pool, uint64_t offset, size_t size,
                          std::span<const ConstRegion> parts);
  // Device gets over the Unix socket: leases (in HBM where the value is there
  // and the pools are mapped), the copies into the parts, the releases.
  // `out[i]` and `sizes[i]` for items[i].
  void BatchGetDeviceLeased(std::span<const DeviceGetItem> items, std::string_view tenant,
                            Status* out, uint64_t* bytes);

  // Loads the device runtime options.device_copies names (none for "").
  // Errors: INVALID_ARGUMENT (unknown kind), UNAVAILABLE / NOT_SUPPORTED (no
  // driver, no GPU, a build without CUDA), naming the cause.
  Status OpenDevice(const ClientOptions& options);
  // Copies a put's parts, in order, to `dst` (host memory): memcpy, or out
  // of GPU memory while device_parts.
  Status GatherParts(char* dst, std::span<const ConstRegion> parts);

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

}  // namespace tierkv

#endif  // TIERKV_CLIENT_CLIENT_IMPL_H_
