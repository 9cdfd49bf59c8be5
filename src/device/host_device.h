// HostMemoryDevices: a fake DeviceRuntime over host memory, for tests on
// machines without a GPU. Each device has a fixed size; an allocation is a
// memfd mapping, so its IpcHandle (the owner's pid and descriptor) can be
// imported by another process of the same user through /proc, as a CUDA IPC
// handle is by another process on the GPU's host.
#ifndef TIERKV_DEVICE_HOST_DEVICE_H_
#define TIERKV_DEVICE_HOST_DEVICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.h"

namespace tierkv {

// One fake device per entry of `device_bytes`, of that many bytes each.
std::unique_ptr<DeviceRuntime> MakeHostMemoryDevices(std::vector<uint64_t> device_bytes);

}  // namespace tierkv

#endif  // TIERKV_DEVICE_HOST_DEVICE_H_
