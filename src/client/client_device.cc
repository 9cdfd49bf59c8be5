// Puts from and gets into GPU memory (ClientOptions::device_copies): the
// scatter/gather paths with the parts' copies done by the device runtime.
#include <cstring>

#include "client/client_impl.h"
#include "device/cuda_device.h"
#include "device/host_device.h"

namespace tierkv {
namespace {

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
  std::vector<std::string_view> keys;
  std::vector<size_t> wanted(items.size());
  keys.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    keys.push_back(items[i].key);
    for (const DeviceRegion& r : items[i].parts) wanted[i] += r.size;
  }
  uint64_t bytes = 0;
  std::vector<Status> st = impl_->BatchGetAll(
      keys, tenant,
      [&](size_t i, const char* data, size_t size) {
        if (size != wanted[i]) {
          return InvalidArgument("the value is " + std::to_string(size) +
                                 " bytes, not the parts' total of " + std::to_string(wanted[i]));
        }
        for (const DeviceRegion& r : items[i].parts) {
          Status copied = impl_->device->CopyToDevice(r.ptr, data, r.size);
          if (!copied.ok()) {
            return Status(Code::kIoError, "copy into GPU memory: " + copied.message());
          }
          data += r.size;
        }
        bytes += size;
        return Status::Ok();
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
