// Puts from and gets into GPU memory (ClientOptions::device_copies): the
// scatter/gather paths with the parts' copies done by the device runtime.
#include <cstring>

#include "client/client_impl.h"
#include "device/cuda_device.h"
#include "device/host_device.h"

namespace tierkv {
namespace {

// Bytes of one chunk of device gets over the Unix socket (see BatchGetIntoDevice).
constexpr size_t kDeviceChunkBytes = 64u << 20;

Status NoDevice() {
  return Status(Code::kNotSupported,
                "this client was connected without device_copies: GPU memory cannot be copied");
}

// RAII for Impl::device_parts over one put.
class DevicePartsScope {
 public:
  explicit DevicePartsScope(bool& flag) : flag_(flag) { flag_ = true; }
  ~DevicePartsScope() { flag_ = false; }

 private:
  bool& flag_;
};

}  // namespace

Status Client::Impl::OpenDevice(const ClientOptions& options) {
  const std::string& kind = options.device_copies;
  if (kind.empty()) return Status::Ok();
  if (kind == "host") {
    // Addresses are host addresses; the device's own memory is never used.
    device_runtime = MakeHostMemoryDevices({4096});
  } else if (kind == "cuda") {
    Result<std::unique_ptr<DeviceRuntime>> cuda = LoadCudaDriver(options.cuda_library);
    if (!cuda.ok()) {
      return Status(cuda.status().code(), "device_copies: " + cuda.status().message());
    }
    device_runtime = std::move(*cuda);
  } else {
    return InvalidArgument("device_copies must be empty, cuda or host; got '" + kind + "'");
  }
  Result<std::unique_ptr<Device>> opened = device_runtime->Open(0);
  if (!opened.ok()) {
    return Status(opened.status().code(), "device_copies: " + opened.status().message());
  }
  device = std::move(*opened);
  device_runtime_kind = kind;
  return Status::Ok();
}

bool Client::Impl::HbmReady() {
  if (!device || !conn.shared_memory()) return false;
  const uint64_t incarnation = conn.incarnation();
  if (incarnation != hbm_incarnation) {
    CloseHbmImports();
    hbm_incarnation = incarnation;
    // Only handles of this client's kind of device can be mapped here.
    const uint8_t backend = device_runtime_kind == "host" ? 1 : 0;
    for (const proto::HbmPoolInfo& p : conn.limits().hbm_pools) {
      DevicePtr base = 0;
      if (p.backend == backend) {
        IpcHandle h;
        h.bytes = p.handle;
        Result<DevicePtr> mapped = device->Import(h);
        if (mapped.ok()) base = *mapped;
      }
      hbm_bases.push_back(base);
    }
  }
  return !hbm_bases.empty() &&
         std::all_of(hbm_bases.begin(), hbm_bases.end(), [](DevicePtr b) { return b != 0; });
}

void Client::Impl::CloseHbmImports() {
  for (DevicePtr base : hbm_bases) {
    if (base != 0) (void)device->CloseImport(base);
  }
  hbm_bases.clear();
}

// Where `size` bytes at `offset` of HBM pool `pool` are mapped here, or 0.
DevicePtr Client::Impl::HbmAddress(uint32_t pool, uint64_t offset, size_t size) {
  if (conn.incarnation() != hbm_incarnation && !HbmReady()) return 0;  // reconnected meanwhile
  const auto& pools = conn.limits().hbm_pools;
  if (pool >= hbm_bases.size() || pool >= pools.size() || hbm_bases[pool] == 0) return 0;
  if (offset > pools[pool].capacity || size > pools[pool].capacity - offset) return 0;
  return hbm_bases[pool] + offset;
}

Status Client::Impl::GatherPartsToHbm(uint32_t pool, uint64_t offset, size_t size,
                                      std::span<const ConstRegion> parts) {
  DevicePtr dst = HbmAddress(pool, offset, size);
  if (dst == 0) {
    return Status(Code::kProtocolError, "the manager granted a range of HBM pool " +
                                            std::to_string(pool) + " this client has not mapped");
  }
  for (const ConstRegion& part : parts) {
    Status st = device->CopyOnDevice(dst, reinterpret_cast<DevicePtr>(part.data), part.size);
    if (!st.ok()) return Status(Code::kIoError, "copy into the manager's HBM: " + st.message());
    dst += part.size;
  }
  return Status::Ok();
}

void Client::Impl::BatchGetDeviceLeased(std::span<const DeviceGetItem> items,
                                        std::string_view tenant, Status* out, uint64_t* bytes) {
  const bool d2d = HbmReady();
  proto::BatchKeysRequest req;
  req.tenant = tenant;
  for (const DeviceGetItem& it : items) req.keys.push_back(it.key);
  req.lookup_flags = d2d ? proto::kLookupHbm : 0;
  Writer w = Begin();
  req.Encode(w);
  if (Status st = Call(Opcode::kBatchLease); !st.ok()) {
    std::fill(out, out + items.size(), st);
    return;
  }
  Reader r(reply);
  const uint32_t n = r.U32();
  std::vector<uint64_t> ids;
  std::vector<size_t> leased;  // item of each id
  // A copy that finished before its lease's deadline is intact whatever the
  // release answers; one that did not is kept only if the release says the
  // lease still held. Judged as each copy ends.
  std::vector<bool> intact;
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = i < n ? r.ItemStatus() : Status(Code::kProtocolError, "short batch_lease reply");
    if (!out[i].ok()) continue;
    const proto::LeaseReply l = proto::DecodeLeaseReply(r);
    Medium medium = Medium::kDram;
    uint32_t pool = 0;
    if (d2d && !proto::DecodePlacement(r, &medium, &pool)) {
      out[i] = Status(Code::kProtocolError, "malformed batch_lease reply");
      break;
    }
    ids.push_back(l.lease_id);
    leased.push_back(i);
    out[i] = CopyLeased(l, medium, pool, items[i].parts);
    intact.push_back(CopyFinishedWithinLease(l.deadline_nanos));
  }
  if (ids.empty()) return;
  Writer rel = Begin();
  proto::BatchIdsRequest{ids}.Encode(rel);
  const Status st = Call(Opcode::kBatchRelease);
  Reader rr(reply);
  const uint32_t m = st.ok() ? rr.U32() : 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    const Status released = !st.ok() ? st
                            : j < m  ? rr.ItemStatus()
                                     : Status(Code::kProtocolError, "short batch_release reply");
    Status& item = out[leased[j]];
    if (item.ok() && !released.ok() && !intact[j]) item = released;
    if (item.ok()) {
      for (const DeviceRegion& p : items[leased[j]].parts) *bytes += p.size;
    }
  }
}

Status Client::Impl::CopyLeased(const proto::LeaseReply& l, Medium medium, uint32_t pool,
                                std::span<const DeviceRegion> parts) {
  size_t wanted = 0;
  for (const DeviceRegion& p : parts) wanted += p.size;
  if (l.size != wanted) return PartsMismatch(l.size, wanted);
  if (medium == Medium::kDram) {
    if (l.offset + l.size > conn.pool_size()) {
      return Status(Code::kProtocolError, "lease reply outside the pool");
    }
    return ScatterToDevice(conn.pool() + l.offset, parts);
  }
  DevicePtr src = HbmAddress(pool, l.offset, l.size);
  if (src == 0) {
    return Status(Code::kProtocolError, "the manager leased a range of HBM pool " +
                                            std::to_string(pool) + " this client has not mapped");
  }
  for (const DeviceRegion& p : parts) {
    if (Status st = device->CopyOnDevice(p.ptr, src, p.size); !st.ok()) {
      return Status(Code::kIoError, "copy out of the manager's HBM: " + st.message());
    }
    src += p.size;
  }
  return Status::Ok();
}

Status Client::Impl::ScatterToDevice(const uint8_t* src, std::span<const DeviceRegion> parts) {
  for (const DeviceRegion& p : parts) {
    if (Status st = device->CopyToDevice(p.ptr, src, p.size); !st.ok()) {
      return Status(Code::kIoError, "copy into GPU memory: " + st.message());
    }
    src += p.size;
  }
  return Status::Ok();
}

Status Client::Impl::GatherParts(char* dst, std::span<const ConstRegion> parts) {
  for (const ConstRegion& part : parts) {
    if (device_parts) {
      Status st = device->CopyToHost(dst, reinterpret_cast<DevicePtr>(part.data), part.size);
      if (!st.ok()) return Status(Code::kIoError, "copy out of GPU memory: " + st.message());
    } else {
      std::memcpy(dst, part.data, part.size);
    }
    dst += part.size;
  }
  return Status::Ok();
}

std::vector<Status> Client::BatchPutFromDevice(std::span<const DevicePutItem> items,
                                               std::string_view tenant, bool upsert) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->device) return std::vector<Status>(items.size(), NoDevice());
  // Connected first, so that the path below is the connection's real one.
  if (Status st = impl_->conn.EnsureOpen(); !st.ok()) return std::vector<Status>(items.size(), st);
  // The parts as regions whose addresses are device addresses.
  std::vector<ConstRegion> regions;
  for (const DevicePutItem& it : items) {
    for (const DeviceRegion& r : it.parts) {
      regions.push_back({reinterpret_cast<const void*>(r.ptr), r.size});
    }
  }
  std::vector<PutPartsItem> parts;
  parts.reserve(items.size());
  std::vector<Status> staged_status(items.size());
  std::vector<std::string> staged;  // over TCP: each value copied to the host first
  const bool shm = impl_->conn.shared_memory();
  if (!shm) staged.resize(items.size());
  std::vector<ConstRegion> staged_regions(items.size());
  size_t at = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::span<const ConstRegion> item_parts(regions.data() + at, items[i].parts.size());
    at += items[i].parts.size();
    if (shm) {
      parts.push_back({items[i].key, item_parts, items[i].group_id});
      continue;
    }
    staged[i].resize(TotalSize(item_parts));
    DevicePartsScope scope(impl_->device_parts);
    staged_status[i] = impl_->GatherParts(staged[i].data(), item_parts);
    staged_regions[i] = {staged[i].data(), staged[i].size()};
    parts.push_back(
        {items[i].key, std::span<const ConstRegion>(&staged_regions[i], 1), items[i].group_id});
  }
  if (shm) {
    DevicePartsScope scope(impl_->device_parts);
    return impl_->BatchPutAll(parts, tenant, upsert);
  }
  // Items whose copy to the host failed are not sent.
  std::vector<PutPartsItem> ready;
  std::vector<size_t> ready_index;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!staged_status[i].ok()) continue;
    ready.push_back(parts[i]);
    ready_index.push_back(i);
  }
  std::vector<Status> sent = impl_->BatchPutAll(ready, tenant, upsert);
  for (size_t j = 0; j < ready.size(); ++j) staged_status[ready_index[j]] = sent[j];
  return staged_status;
}

std::vector<Result<size_t>> Client::BatchGetIntoDevice(std::span<const DeviceGetItem> items,
                                                       std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->device) return std::vector<Result<size_t>>(items.size(), NoDevice());
  if (Status st = impl_->conn.EnsureOpen(); !st.ok()) {
    return std::vector<Result<size_t>>(items.size(), st);
  }
  std::vector<std::string_view> keys;
  std::vector<size_t> wanted(items.size());
  keys.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    keys.push_back(items[i].key);
    for (const DeviceRegion& r : items[i].parts) wanted[i] += r.size;
  }
  uint64_t bytes = 0;
  if (impl_->conn.shared_memory()) {
    // Chunks of at most the batch limit and kDeviceChunkBytes (one item at
    // least), so that a chunk's copies end well within its leases.
    const int64_t start = MonoNanos();
    std::vector<Status> st(items.size());
    for (size_t i = 0; i < items.size();) {
      size_t j = i + 1;
      size_t chunk_bytes = wanted[i];
      while (j < items.size() && j - i < impl_->MaxBatch() &&
             chunk_bytes + wanted[j] <= kDeviceChunkBytes) {
        chunk_bytes += wanted[j++];
      }
      impl_->BatchGetDeviceLeased(items.subspan(i, j - i), tenant, st.data() + i, &bytes);
      i = j;
    }
    impl_->Account(TransferStats::kBatchGet, bytes, start);
    return WithSizes(st, wanted);
  }
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        if (size != wanted[i]) return PartsMismatch(size, wanted[i]);
        Status copied =
            impl_->ScatterToDevice(reinterpret_cast<const uint8_t*>(data), items[i].parts);
        if (copied.ok()) bytes += size;
        return copied;
      },
      &bytes);
  return WithSizes(st, wanted);
}

Status Client::PutFromDevice(std::string_view key, std::span<const DeviceRegion> parts,
                             const WriteOptions& options, bool upsert) {
  const DevicePutItem item{key, parts, options.group_id};
  return BatchPutFromDevice(std::span<const DevicePutItem>(&item, 1), options.tenant, upsert)[0];
}

Result<size_t> Client::GetIntoDevice(std::string_view key, std::span<const DeviceRegion> parts,
                                     std::string_view tenant) {
  const DeviceGetItem item{key, parts};
  return BatchGetIntoDevice(std::span<const DeviceGetItem>(&item, 1), tenant)[0];
}

}  // namespace tierkv
