// HbmTier: the HBM pools a manager owns, one per GPU named by --hbm-devices,
// each of --hbm-size (docs/hbm.md). Opened once at start; a manager asked for
// HBM that cannot have it does not start, and says why.
//
// Thread-safety: immutable after Open; the pools are thread-safe.
#ifndef TIERKV_MEDIA_HBM_TIER_H_
#define TIERKV_MEDIA_HBM_TIER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/metric_sink.h"
#include "device/device.h"
#include "media/hbm_pool.h"
#include "tierkv/status.h"

namespace tierkv {

struct HbmConfig {
  std::vector<int> devices;  // GPU ordinals (--hbm-devices); empty: no HBM tier
  uint64_t size = 0;         // bytes per device (--hbm-size)
  // Where the devices come from: "cuda" (the driver, loaded at run time) or
  // "host" (stand-in devices over host memory, for hosts without a GPU:
  // tests and trials; the bytes are host memory).
  std::string backend = "cuda";
  std::string cuda_library;  // the driver library to load ("": libcuda.so.1)

  bool enabled() const { return !devices.empty(); }
};

class HbmTier {
 public:
  // Opens a pool of `config.size` on each device of `config.devices`.
  // Errors name the device and the cause: UNAVAILABLE (no driver, no GPU, a
  // stub library), NOT_SUPPORTED (built without CUDA), INVALID_ARGUMENT (no
  // such GPU, or more than it has), NO_SPACE (not that much free memory).
  static Result<std::unique_ptr<HbmTier>> Open(const HbmConfig& config);
  // The same over a runtime the caller made (tests: host-memory devices).
  static Result<std::unique_ptr<HbmTier>> Open(const HbmConfig& config,
                                               std::unique_ptr<DeviceRuntime> runtime);

  const std::vector<std::unique_ptr<HbmPool>>& pools() const { return pools_; }
  uint64_t capacity() const;
  uint64_t allocated() const;
  // "cuda", or "host" for the stand-in devices (HbmConfig::backend).
  const std::string& backend() const { return backend_; }
  // Reports the tierkv_hbm_* families: each device's name and pool.
  void ReportMetrics(MetricSink& sink) const;

 private:
  HbmTier() = default;
  std::unique_ptr<DeviceRuntime> runtime_;
  std::vector<std::unique_ptr<HbmPool>> pools_;  // in --hbm-devices order
  std::string backend_;
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_HBM_TIER_H_
