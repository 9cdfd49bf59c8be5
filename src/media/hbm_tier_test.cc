// HbmTier: the pools a manager opens for --hbm-devices, on the host-memory
// stand-in devices, and the refusals on a host without a GPU or driver.
#include "media/hbm_tier.h"

#include <gtest/gtest.h>

#include <string>

#include "device/cuda_device.h"
#include "device/host_device.h"

namespace tierkv {
namespace {

bool Names(const Status& st, const std::string& what) {
  return st.message().find(what) != std::string::npos;
}

TEST(HbmTierTest, OnePoolPerDeviceOfTheSizeAsked) {
  HbmConfig c;
  c.devices = {0, 2};
  c.size = 8 << 20;
  c.backend = "host";
  auto tier = HbmTier::Open(c);
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  ASSERT_EQ((*tier)->pools().size(), 2u);
  EXPECT_EQ((*tier)->pools()[0]->device().ordinal(), 0);
  EXPECT_EQ((*tier)->pools()[1]->device().ordinal(), 2);
  EXPECT_EQ((*tier)->capacity(), 16u << 20);
  EXPECT_EQ((*tier)->allocated(), 0u);
  auto a = (*tier)->pools()[1]->Allocate(5000);
  ASSERT_TRUE(a.has_value());
  EXPECT_GE((*tier)->allocated(), 5000u);
  EXPECT_EQ((*tier)->backend(), "host");
  MetricCapture m;
  (*tier)->ReportMetrics(m);
  EXPECT_EQ(m.Value("tierkv_hbm_capacity_bytes{device=\"0\"}"), 8 << 20);
  EXPECT_EQ(m.Value("tierkv_hbm_capacity_bytes{device=\"2\"}"), 8 << 20);
  EXPECT_GE(m.Value("tierkv_hbm_allocated_bytes{device=\"2\"}"), 5000);
  EXPECT_EQ(m.Value("tierkv_hbm_allocated_bytes{device=\"0\"}"), 0);
  EXPECT_EQ(m.Value("tierkv_hbm_info{device=\"2\",name=\"host memory device 2\",backend=\"host\"}"),
            1);
  EXPECT_EQ(m.Families("tierkv_hbm_info"), 1);
}

TEST(HbmTierTest, ADeviceTheHostLacksOrTooLargeASizeIsRefusedNamingIt) {
  HbmConfig c;
  c.devices = {1};
  c.size = 8 << 20;
  auto missing = HbmTier::Open(c, MakeHostMemoryDevices({8 << 20}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Names(missing.status(), "--hbm-devices")) << missing.status().ToString();
  EXPECT_TRUE(Names(missing.status(), "1")) << missing.status().ToString();

  c.devices = {0};
  c.size = 64 << 20;
  auto too_big = HbmTier::Open(c, MakeHostMemoryDevices({8 << 20}));
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(Names(too_big.status(), "--hbm-size")) << too_big.status().ToString();
}

TEST(HbmTierTest, StandInDevicesCannotTakeMoreThanTheHostHas) {
  HbmConfig c;
  c.devices = {0, 1};
  c.size = 1ull << 50;  // 1 PiB each
  c.backend = "host";
  auto r = HbmTier::Open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Names(r.status(), "--hbm-size")) << r.status().ToString();
  EXPECT_TRUE(Names(r.status(), "more than this host has")) << r.status().ToString();
}

TEST(HbmTierTest, WithoutADriverTheTierIsRefusedNamingTheCause) {
  HbmConfig c;
  c.devices = {0};
  c.size = 8 << 20;
  c.cuda_library = "/nonexistent/libcuda.so.1";
  auto none = HbmTier::Open(c);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Names(none.status(), "--hbm-devices needs a GPU and its driver"))
      << none.status().ToString();
  if (BuiltWithCuda()) {
    EXPECT_EQ(none.status().code(), Code::kUnavailable) << none.status().ToString();
    EXPECT_TRUE(Names(none.status(), "/nonexistent/libcuda.so.1")) << none.status().ToString();
  } else {
    EXPECT_EQ(none.status().code(), Code::kNotSupported) << none.status().ToString();
  }
}

}  // namespace
}  // namespace tierkv
