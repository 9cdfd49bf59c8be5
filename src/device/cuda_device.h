// The CUDA driver, loaded at run time (dlopen of libcuda.so.1), as a
// DeviceRuntime. Nothing of CUDA is linked into the manager: a host without
// a GPU or driver starts and runs as before; only asking for HBM there fails,
// with the cause (docs/hbm.md). Built when the CUDA toolkit's headers are
// found (TIERKV_WITH_CUDA); otherwise LoadCudaDriver says so.
#ifndef TIERKV_DEVICE_CUDA_DEVICE_H_
#define TIERKV_DEVICE_CUDA_DEVICE_H_

#include <memory>
#include <string>

#include "device/device.h"

namespace tierkv {

// Loads the driver from `library` (empty: "libcuda.so.1", the name the NVIDIA
// driver installs) and initializes it. Errors, each naming the cause:
// NOT_SUPPORTED (built without the CUDA toolkit), UNAVAILABLE (no driver
// library, a library without the calls needed, the toolkit's stub library
// instead of a driver, cuInit failing: no GPU or a broken driver).
Result<std::unique_ptr<DeviceRuntime>> LoadCudaDriver(const std::string& library = "");

// Whether this build can drive CUDA at all.
bool BuiltWithCuda();

}  // namespace tierkv

#endif  // TIERKV_DEVICE_CUDA_DEVICE_H_
