// HbmPool: one GPU's share of the HBM tier (docs/hbm.md). One allocation of
// device memory, carved into byte ranges by an OffsetAllocator with the DRAM
// pool's alignment and size classes, so the tier accounts, evicts and moves
// ranges as the DRAM tier does. The allocation is exported once as an IPC
// handle that same-host engines may import to copy straight into or out of it.
//
// Thread-safety: all methods are thread-safe. The memory of a range belongs to
// whoever holds its Extent.
#ifndef TIERKV_MEDIA_HBM_POOL_H_
#define TIERKV_MEDIA_HBM_POOL_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "device/device.h"
#include "media/offset_allocator.h"
#include "tierkv/status.h"

namespace tierkv {

class HbmPool {
 public:
  // Takes `capacity` bytes (rounded down to 4 KiB) of `device`'s memory.
  // Errors, each naming --hbm-size and the GPU: INVALID_ARGUMENT (0, or more
  // than the device has), NO_SPACE (the device has not that much free),
  // IO_ERROR (the driver failed; the call named).
  static Result<std::unique_ptr<HbmPool>> Create(std::unique_ptr<Device> device, uint64_t capacity);
  ~HbmPool();  // gives the memory back to the device
  HbmPool(const HbmPool&) = delete;
  HbmPool& operator=(const HbmPool&) = delete;

  static constexpr uint64_t kAlignment = 4096;

  // See OffsetAllocator.
  std::optional<Extent> Allocate(uint64_t size) { return allocator_.Allocate(size); }
  void Free(const Extent& extent, uint64_t requested) { allocator_.Free(extent, requested); }

  // Copies `n` bytes between host memory and the pool at `offset`; each
  // returns once the bytes are in place. INVALID_ARGUMENT past the pool's end.
  Status Write(uint64_t offset, const void* src, uint64_t n);
  Status Read(void* dst, uint64_t offset, uint64_t n);

  Device& device() { return *device_; }
  DevicePtr base() const { return base_; }
  // The pool's export, for same-host engines.
  const IpcHandle& handle() const { return handle_; }
  uint64_t capacity() const { return allocator_.capacity(); }
  AllocatorStats Stats() const { return allocator_.Stats(); }
  uint64_t allocated_bytes() const { return allocator_.allocated_bytes(); }

 private:
  HbmPool(std::unique_ptr<Device> device, DevicePtr base, uint64_t capacity, IpcHandle handle);
  Status CheckRange(uint64_t offset, uint64_t n) const;

  const std::unique_ptr<Device> device_;
  const DevicePtr base_;
  const IpcHandle handle_;
  OffsetAllocator allocator_;
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_HBM_POOL_H_
