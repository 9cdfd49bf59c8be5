#include "device/host_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

namespace tierkv {
namespace {

// The fake's handle: which process holds the memfd, its descriptor, the size.
struct HostHandle {
  uint32_t magic = 0x486b4d44;  // "DMkH"
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t bytes = 0;
};
static_assert(sizeof(HostHandle) <= sizeof(IpcHandle::bytes));

Status Errno(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

class HostDevice final : public Device {
 public:
  HostDevice(int ordinal, uint64_t total) : ordinal_(ordinal), total_(total) {}
  ~HostDevice() override {
    std::lock_guard lock(mu_);
    for (auto& [ptr, a] : allocations_) Unmap(ptr, a);
    for (auto& [ptr, bytes] : imports_) munmap(reinterpret_cast<void*>(ptr), bytes);
  }

  int ordinal() const override { return ordinal_; }
  std::string name() const override { return "host memory device " + std::to_string(ordinal_); }
  uint64_t total_bytes() const override { return total_; }

  Result<DevicePtr> Allocate(uint64_t bytes) override {
    if (bytes == 0) return InvalidArgument("an allocation of 0 bytes");
    std::lock_guard lock(mu_);
    if (bytes > total_ - used_) {
      return Status(Code::kNoSpace, "device " + std::to_string(ordinal_) + " has " +
                                        std::to_string(total_ - used_) + " bytes free");
    }
    const int fd = memfd_create("tierkv-fake-hbm", MFD_CLOEXEC);
    if (fd < 0) return Errno("memfd_create");
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      Status st = Errno("ftruncate");
      close(fd);
      return st;
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      Status st = Errno("mmap");
      close(fd);
      return st;
    }
    used_ += bytes;
    const DevicePtr ptr = reinterpret_cast<DevicePtr>(p);
    allocations_[ptr] = {fd, bytes};
    return ptr;
  }

  Status Free(DevicePtr ptr) override {
    std::lock_guard lock(mu_);
    auto it = allocations_.find(ptr);
    if (it == allocations_.end()) return InvalidArgument("not an allocation of this device");
    used_ -= it->second.bytes;
    Unmap(ptr, it->second);
    allocations_.erase(it);
    return Status::Ok();
  }

  Status CopyToDevice(DevicePtr dst, const void* src, uint64_t n) override {
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
    return Status::Ok();
  }
  Status CopyToHost(void* dst, DevicePtr src, uint64_t n) override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
    return Status::Ok();
  }
  Status CopyOnDevice(DevicePtr dst, DevicePtr src, uint64_t n) override {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    return Status::Ok();
  }

  Result<IpcHandle> Export(DevicePtr base) override {
    std::lock_guard lock(mu_);
    auto it = allocations_.find(base);
    if (it == allocations_.end()) return InvalidArgument("not the base of an allocation");
    HostHandle h;
    h.pid = getpid();
    h.fd = it->second.fd;
    h.bytes = it->second.bytes;
    IpcHandle out;
    std::memcpy(out.bytes.data(), &h, sizeof(h));
    return out;
  }

  Result<DevicePtr> Import(const IpcHandle& handle) override {
    HostHandle h;
    std::memcpy(&h, handle.bytes.data(), sizeof(h));
    if (h.magic != HostHandle{}.magic || h.bytes == 0) {
      return InvalidArgument("not a handle of a host memory device");
    }
    const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Errno("open " + path);
    void* p = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return Errno("mmap " + path);
    std::lock_guard lock(mu_);
    const DevicePtr ptr = reinterpret_cast<DevicePtr>(p);
    imports_[ptr] = h.bytes;
    return ptr;
  }

  Status CloseImport(DevicePtr ptr) override {
    std::lock_guard lock(mu_);
    auto it = imports_.find(ptr);
    if (it == imports_.end()) return InvalidArgument("not an imported mapping");
    munmap(reinterpret_cast<void*>(ptr), it->second);
    imports_.erase(it);
    return Status::Ok();
  }

 private:
  struct Allocation {
    int fd = -1;
    uint64_t bytes = 0;
  };
  static void Unmap(DevicePtr ptr, const Allocation& a) {
    munmap(reinterpret_cast<void*>(ptr), a.bytes);
    close(a.fd);
  }

  const int ordinal_;
  const uint64_t total_;
  std::mutex mu_;
  uint64_t used_ = 0;
  std::map<DevicePtr, Allocation> allocations_;
  std::map<DevicePtr, uint64_t> imports_;  // mapping -> bytes
};

class HostDevices final : public DeviceRuntime {
 public:
  explicit HostDevices(std::vector<uint64_t> sizes) : sizes_(std::move(sizes)) {}
  int count() const override { return static_cast<int>(sizes_.size()); }
  Result<std::unique_ptr<Device>> Open(int ordinal) override {
    if (ordinal < 0 || ordinal >= count()) {
      return InvalidArgument("no device " + std::to_string(ordinal) + " (this host has " +
                             std::to_string(count()) + ")");
    }
    return std::unique_ptr<Device>(std::make_unique<HostDevice>(ordinal, sizes_[ordinal]));
  }

 private:
  const std::vector<uint64_t> sizes_;
};

}  // namespace

std::unique_ptr<DeviceRuntime> MakeHostMemoryDevices(std::vector<uint64_t> device_bytes) {
  return std::make_unique<HostDevices>(std::move(device_bytes));
}

}  // namespace tierkv
