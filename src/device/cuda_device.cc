#include "device/cuda_device.h"

#ifdef TIERKV_WITH_CUDA

#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

namespace tierkv {
namespace {

// The driver calls the tier uses, resolved by their versioned symbol names.
struct Driver {
  void* library = nullptr;
  decltype(&cuInit) init = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;
  decltype(&cuDeviceGetCount) device_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetName) device_name = nullptr;
  decltype(&cuDeviceTotalMem_v2) device_total = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) ctx_retain = nullptr;
  decltype(&cuDevicePrimaryCtxRelease_v2) ctx_release = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set = nullptr;
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemFree_v2) free = nullptr;
  decltype(&cuMemcpyHtoD_v2) h2d = nullptr;
  decltype(&cuMemcpyDtoH_v2) d2h = nullptr;
  decltype(&cuMemcpyDtoD_v2) d2d = nullptr;
  decltype(&cuCtxSynchronize) sync = nullptr;
  decltype(&cuIpcGetMemHandle) ipc_get = nullptr;
  decltype(&cuIpcOpenMemHandle_v2) ipc_open = nullptr;
  decltype(&cuIpcCloseMemHandle) ipc_close = nullptr;

  std::string Name(CUresult r) const {
    const char* name = nullptr;
    if (error_name == nullptr || error_name(r, &name) != CUDA_SUCCESS || name == nullptr) {
      return "CUDA error " + std::to_string(static_cast<int>(r));
    }
    return name;
  }
  Status Check(CUresult r, const char* call) const {
    if (r == CUDA_SUCCESS) return Status::Ok();
    const Code code = r == CUDA_ERROR_OUT_OF_MEMORY ? Code::kNoSpace : Code::kIoError;
    return Status(code, std::string(call) + " failed: " + Name(r));
  }
};

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *out != nullptr;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(std::shared_ptr<const Driver> driver, int ordinal, CUdevice device, CUcontext ctx,
             std::string name, uint64_t total)
      : d_(std::move(driver)),
        ordinal_(ordinal),
        device_(device),
        ctx_(ctx),
        name_(std::move(name)),
        total_(total) {}
  ~CudaDevice() override { (void)d_->ctx_release(device_); }

  int ordinal() const override { return ordinal_; }
  std::string name() const override { return name_; }
  uint64_t total_bytes() const override { return total_; }

  Result<DevicePtr> Allocate(uint64_t bytes) override {
    if (Status st = Current(); !st.ok()) return st;
    CUdeviceptr p = 0;
    if (Status st = d_->Check(d_->alloc(&p, bytes), "cuMemAlloc"); !st.ok()) return st;
    return static_cast<DevicePtr>(p);
  }
  Status Free(DevicePtr ptr) override {
    if (Status st = Current(); !st.ok()) return st;
    return d_->Check(d_->free(static_cast<CUdeviceptr>(ptr)), "cuMemFree");
  }
  Status CopyToDevice(DevicePtr dst, const void* src, uint64_t n) override {
    if (Status st = Current(); !st.ok()) return st;
    return d_->Check(d_->h2d(static_cast<CUdeviceptr>(dst), src, n), "cuMemcpyHtoD");
  }
  Status CopyToHost(void* dst, DevicePtr src, uint64_t n) override {
    if (Status st = Current(); !st.ok()) return st;
    return d_->Check(d_->d2h(dst, static_cast<CUdeviceptr>(src), n), "cuMemcpyDtoH");
  }
  Status CopyOnDevice(DevicePtr dst, DevicePtr src, uint64_t n) override {
    if (Status st = Current(); !st.ok()) return st;
    // Device-to-device copies are asynchronous to the host: wait for it.
    if (Status st =
            d_->Check(d_->d2d(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), n),
                      "cuMemcpyDtoD");
        !st.ok()) {
      return st;
    }
    return d_->Check(d_->sync(), "cuCtxSynchronize");
  }
  Result<IpcHandle> Export(DevicePtr base) override {
    if (Status st = Current(); !st.ok()) return st;
    CUipcMemHandle h;
    if (Status st = d_->Check(d_->ipc_get(&h, static_cast<CUdeviceptr>(base)), "cuIpcGetMemHandle");
        !st.ok()) {
      return st;
    }
    IpcHandle out;
    static_assert(sizeof(h.reserved) == sizeof(out.bytes));
    std::memcpy(out.bytes.data(), h.reserved, sizeof(h.reserved));
    return out;
  }
  Result<DevicePtr> Import(const IpcHandle& handle) override {
    if (Status st = Current(); !st.ok()) return st;
    CUipcMemHandle h;
    std::memcpy(h.reserved, handle.bytes.data(), sizeof(h.reserved));
    CUdeviceptr p = 0;
    if (Status st = d_->Check(d_->ipc_open(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                              "cuIpcOpenMemHandle");
        !st.ok()) {
      return st;
    }
    return static_cast<DevicePtr>(p);
  }
  Status CloseImport(DevicePtr ptr) override {
    if (Status st = Current(); !st.ok()) return st;
    return d_->Check(d_->ipc_close(static_cast<CUdeviceptr>(ptr)), "cuIpcCloseMemHandle");
  }

 private:
  // The calling thread works in this device's primary context.
  Status Current() const { return d_->Check(d_->ctx_set(ctx_), "cuCtxSetCurrent"); }

  const std::shared_ptr<const Driver> d_;
  const int ordinal_;
  const CUdevice device_;
  const CUcontext ctx_;
  const std::string name_;
  const uint64_t total_;
};

class CudaRuntime final : public DeviceRuntime {
 public:
  CudaRuntime(std::shared_ptr<const Driver> driver, int count)
      : d_(std::move(driver)), count_(count) {}
  int count() const override { return count_; }
  Result<std::unique_ptr<Device>> Open(int ordinal) override {
    if (ordinal < 0 || ordinal >= count_) {
      return InvalidArgument("no GPU " + std::to_string(ordinal) + " (the driver sees " +
                             std::to_string(count_) + ")");
    }
    CUdevice dev = 0;
    if (Status st = d_->Check(d_->device_get(&dev, ordinal), "cuDeviceGet"); !st.ok()) return st;
    char name[256] = {};
    (void)d_->device_name(name, sizeof(name) - 1, dev);
    size_t total = 0;
    if (Status st = d_->Check(d_->device_total(&total, dev), "cuDeviceTotalMem"); !st.ok()) {
      return st;
    }
    CUcontext ctx = nullptr;
    if (Status st = d_->Check(d_->ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain"); !st.ok()) {
      return st;
    }
    return std::unique_ptr<Device>(
        std::make_unique<CudaDevice>(d_, ordinal, dev, ctx, name, static_cast<uint64_t>(total)));
  }

 private:
  const std::shared_ptr<const Driver> d_;
  const int count_;
};

}  // namespace

bool BuiltWithCuda() { return true; }

Result<std::unique_ptr<DeviceRuntime>> LoadCudaDriver(const std::string& library) {
  const std::string path = library.empty() ? "libcuda.so.1" : library;
  auto d = std::make_shared<Driver>();
  d->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (d->library == nullptr) {
    const char* why = dlerror();
    return Status(Code::kUnavailable, "no NVIDIA driver on this host: " + path +
                                          " could not be loaded (" + (why ? why : "?") + ")");
  }
  struct Symbol {
    const char* name;
    bool ok;
  };
  void* l = d->library;
  const Symbol symbols[] = {
      {"cuInit", Resolve(l, "cuInit", &d->init)},
      {"cuGetErrorName", Resolve(l, "cuGetErrorName", &d->error_name)},
      {"cuDeviceGetCount", Resolve(l, "cuDeviceGetCount", &d->device_count)},
      {"cuDeviceGet", Resolve(l, "cuDeviceGet", &d->device_get)},
      {"cuDeviceGetName", Resolve(l, "cuDeviceGetName", &d->device_name)},
      {"cuDeviceTotalMem_v2", Resolve(l, "cuDeviceTotalMem_v2", &d->device_total)},
      {"cuDevicePrimaryCtxRetain", Resolve(l, "cuDevicePrimaryCtxRetain", &d->ctx_retain)},
      {"cuDevicePrimaryCtxRelease_v2", Resolve(l, "cuDevicePrimaryCtxRelease_v2", &d->ctx_release)},
      {"cuCtxSetCurrent", Resolve(l, "cuCtxSetCurrent", &d->ctx_set)},
      {"cuMemAlloc_v2", Resolve(l, "cuMemAlloc_v2", &d->alloc)},
      {"cuMemFree_v2", Resolve(l, "cuMemFree_v2", &d->free)},
      {"cuMemcpyHtoD_v2", Resolve(l, "cuMemcpyHtoD_v2", &d->h2d)},
      {"cuMemcpyDtoH_v2", Resolve(l, "cuMemcpyDtoH_v2", &d->d2h)},
      {"cuMemcpyDtoD_v2", Resolve(l, "cuMemcpyDtoD_v2", &d->d2d)},
      {"cuCtxSynchronize", Resolve(l, "cuCtxSynchronize", &d->sync)},
      {"cuIpcGetMemHandle", Resolve(l, "cuIpcGetMemHandle", &d->ipc_get)},
      {"cuIpcOpenMemHandle_v2", Resolve(l, "cuIpcOpenMemHandle_v2", &d->ipc_open)},
      {"cuIpcCloseMemHandle", Resolve(l, "cuIpcCloseMemHandle", &d->ipc_close)},
  };
  for (const Symbol& s : symbols) {
    if (!s.ok) {
      return Status(Code::kUnavailable,
                    path + " is not a usable NVIDIA driver: it has no " + s.name);
    }
  }
  const CUresult init = d->init(0);
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    return Status(Code::kUnavailable, path +
                                          " is the CUDA toolkit's stub library, not an NVIDIA "
                                          "driver: this host has no driver installed");
  }
  if (init != CUDA_SUCCESS) {
    return Status(Code::kUnavailable, "the NVIDIA driver did not start (cuInit: " + d->Name(init) +
                                          "): no usable GPU on this host");
  }
  int count = 0;
  if (Status st = d->Check(d->device_count(&count), "cuDeviceGetCount"); !st.ok()) {
    return Status(Code::kUnavailable, st.message());
  }
  return std::unique_ptr<DeviceRuntime>(std::make_unique<CudaRuntime>(d, count));
}

}  // namespace tierkv

#else  // !TIERKV_WITH_CUDA

namespace tierkv {

bool BuiltWithCuda() { return false; }

Result<std::unique_ptr<DeviceRuntime>> LoadCudaDriver(const std::string&) {
  return Status(Code::kNotSupported,
                "this tierkv-server was built without the CUDA toolkit (cuda.h was not found)");
}

}  // namespace tierkv

#endif  // TIERKV_WITH_CUDA
