#include "media/hbm_pool.h"

#include "common/units.h"

namespace tierkv {

Result<std::unique_ptr<HbmPool>> HbmPool::Create(std::unique_ptr<Device> device,
                                                 uint64_t capacity) {
  capacity -= capacity % kAlignment;
  if (capacity == 0) return InvalidArgument("an HBM pool needs at least 4 KiB");
  if (capacity > device->total_bytes()) {
    return InvalidArgument("--hbm-size " + FormatByteSize(capacity) + " is more than GPU " +
                           std::to_string(device->ordinal()) + " (" + device->name() + ") has (" +
                           FormatByteSize(device->total_bytes()) + ")");
  }
  // The driver's refusals, named like the size check above.
  const auto refused = [&](const Status& st) {
    return Status(st.code(), "--hbm-size " + FormatByteSize(capacity) + " on GPU " +
                                 std::to_string(device->ordinal()) + ": " + st.message());
  };
  Result<DevicePtr> base = device->Allocate(capacity);
  if (!base.ok()) return refused(base.status());
  Result<IpcHandle> handle = device->Export(*base);
  if (!handle.ok()) {
    (void)device->Free(*base);
    return refused(handle.status());
  }
  return std::unique_ptr<HbmPool>(new HbmPool(std::move(device), *base, capacity, *handle));
}

HbmPool::HbmPool(std::unique_ptr<Device> device, DevicePtr base, uint64_t capacity,
                 IpcHandle handle)
    : device_(std::move(device)), base_(base), handle_(handle), allocator_(capacity, kAlignment) {}

HbmPool::~HbmPool() { (void)device_->Free(base_); }

Status HbmPool::CheckRange(uint64_t offset, uint64_t n) const {
  if (offset > capacity() || n > capacity() - offset) {
    return InvalidArgument("range past the end of the HBM pool");
  }
  return Status::Ok();
}

Status HbmPool::Write(uint64_t offset, const void* src, uint64_t n) {
  if (Status st = CheckRange(offset, n); !st.ok()) return st;
  return device_->CopyToDevice(base_ + offset, src, n);
}

Status HbmPool::Read(void* dst, uint64_t offset, uint64_t n) {
  if (Status st = CheckRange(offset, n); !st.ok()) return st;
  return device_->CopyToHost(dst, base_ + offset, n);
}

}  // namespace tierkv
