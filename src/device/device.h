// Device: the seam between the HBM tier and a GPU (docs/hbm.md). Everything
// the tier asks of a GPU goes through it: device memory, copies in each
// direction, and the IPC handles that let an engine process on the same host
// map the tier's memory. The real one drives the CUDA driver, loaded at run
// time (cuda_device.h), so one manager binary runs on hosts with and without
// a GPU; HostMemoryDevices (host_device.h) is a fake over host memory, so
// every part of the tier but the CUDA calls is tested without a GPU.
//
// Addresses are device addresses (CUdeviceptr), opaque to the host except on
// the fake, where they are host addresses.
//
// Thread-safety: every method from any thread. A copy returns once the bytes
// are in place (synchronous, as the driver's cuMemcpy calls are).
#ifndef TIERKV_DEVICE_DEVICE_H_
#define TIERKV_DEVICE_DEVICE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "tierkv/status.h"

namespace tierkv {

using DevicePtr = uint64_t;

// An exported allocation, as another process on the host imports it. For
// CUDA the first 64 bytes are the driver's CUipcMemHandle; the fake writes
// its own layout. Carries no authority beyond the host's own (docs/hbm.md,
// "Trust").
struct IpcHandle {
  std::array<uint8_t, 64> bytes{};
};

class Device {
 public:
  virtual ~Device() = default;
  virtual int ordinal() const = 0;
  virtual std::string name() const = 0;
  // Memory of the device in bytes.
  virtual uint64_t total_bytes() const = 0;

  // `bytes` of device memory. Errors: NO_SPACE (the device has not that
  // much free), IO_ERROR (the driver failed; the message names the call).
  virtual Result<DevicePtr> Allocate(uint64_t bytes) = 0;
  virtual Status Free(DevicePtr ptr) = 0;

  // Copies of `n` bytes; each returns once the bytes are in place.
  virtual Status CopyToDevice(DevicePtr dst, const void* src, uint64_t n) = 0;
  virtual Status CopyToHost(void* dst, DevicePtr src, uint64_t n) = 0;
  virtual Status CopyOnDevice(DevicePtr dst, DevicePtr src, uint64_t n) = 0;

  // The handle of an allocation (its base address), for another process.
  virtual Result<IpcHandle> Export(DevicePtr base) = 0;
  // Maps another process's exported allocation here; CloseImport unmaps it.
  virtual Result<DevicePtr> Import(const IpcHandle& handle) = 0;
  virtual Status CloseImport(DevicePtr ptr) = 0;
};

// The GPUs of this host, as a driver sees them.
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual int count() const = 0;
  // Errors: INVALID_ARGUMENT (no such ordinal), IO_ERROR (the driver failed).
  virtual Result<std::unique_ptr<Device>> Open(int ordinal) = 0;
};

}  // namespace tierkv

#endif  // TIERKV_DEVICE_DEVICE_H_
