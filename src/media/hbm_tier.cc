#include "media/hbm_tier.h"

#include <unistd.h>

#include <algorithm>

#include "common/units.h"
#include "device/cuda_device.h"
#include "device/host_device.h"

namespace tierkv {

Result<std::unique_ptr<HbmTier>> HbmTier::Open(const HbmConfig& config) {
  if (config.backend == "host") {
    // Stand-in devices are host memory: together no more than the host has
    // (a memfd would take any size, and fail only when written).
    const uint64_t host = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (config.size > host / std::max<size_t>(1, config.devices.size())) {
      return InvalidArgument("--hbm-size " + FormatByteSize(config.size) + " on " +
                             std::to_string(config.devices.size()) +
                             " stand-in device(s) of host memory is more than this host has (" +
                             FormatByteSize(host) + ")");
    }
    // Each stand-in device is as large as the pool asked of it.
    std::vector<uint64_t> sizes;
    int highest = -1;
    for (int d : config.devices) highest = std::max(highest, d);
    sizes.assign(static_cast<size_t>(highest + 1), config.size);
    return Open(config, MakeHostMemoryDevices(std::move(sizes)));
  }
  Result<std::unique_ptr<DeviceRuntime>> cuda = LoadCudaDriver(config.cuda_library);
  if (!cuda.ok()) {
    return Status(cuda.status().code(),
                  "--hbm-devices needs a GPU and its driver: " + cuda.status().message());
  }
  return Open(config, std::move(*cuda));
}

Result<std::unique_ptr<HbmTier>> HbmTier::Open(const HbmConfig& config,
                                               std::unique_ptr<DeviceRuntime> runtime) {
  std::unique_ptr<HbmTier> tier(new HbmTier());
  tier->backend_ = config.backend;
  for (int ordinal : config.devices) {
    Result<std::unique_ptr<Device>> device = runtime->Open(ordinal);
    if (!device.ok()) {
      return Status(device.status().code(), "--hbm-devices: " + device.status().message());
    }
    Result<std::unique_ptr<HbmPool>> pool = HbmPool::Create(std::move(*device), config.size);
    if (!pool.ok()) return pool.status();  // names --hbm-size and the GPU
    tier->pools_.push_back(std::move(*pool));
  }
  // The pools give their memory back before the runtime goes.
  tier->runtime_ = std::move(runtime);
  return tier;
}

namespace {

constexpr MetricFamily kInfo{"tierkv_hbm_info", "gauge",
                             "HBM tier devices: ordinal, name and backend (cuda or host)"};
constexpr MetricFamily kCapacity{"tierkv_hbm_capacity_bytes", "gauge",
                                 "HBM pool bytes taken of each device"};
constexpr MetricFamily kAllocated{"tierkv_hbm_allocated_bytes", "gauge",
                                  "HBM pool bytes allocated on each device"};

}  // namespace

void HbmTier::ReportMetrics(MetricSink& sink) const {
  std::vector<std::string> devices;  // each pool's label
  for (const auto& p : pools_) {
    devices.push_back(MetricLabel("device", std::to_string(p->device().ordinal())));
  }
  sink.Family(kInfo);
  for (size_t i = 0; i < pools_.size(); ++i) {
    sink.Sample(kInfo.name,
                devices[i] + "," + MetricLabel("name", pools_[i]->device().name()) + "," +
                    MetricLabel("backend", backend_),
                1);
  }
  const auto per_pool = [&](const MetricFamily& f, uint64_t (HbmPool::*value)() const) {
    sink.Family(f);
    for (size_t i = 0; i < pools_.size(); ++i) {
      sink.Sample(f.name, devices[i], ((*pools_[i]).*value)());
    }
  };
  per_pool(kCapacity, &HbmPool::capacity);
  per_pool(kAllocated, &HbmPool::allocated_bytes);
}

uint64_t HbmTier::capacity() const {
  uint64_t total = 0;
  for (const auto& p : pools_) total += p->capacity();
  return total;
}

uint64_t HbmTier::allocated() const {
  uint64_t total = 0;
  for (const auto& p : pools_) total += p->allocated_bytes();
  return total;
}

}  // namespace tierkv
