// HbmPool on the host-memory fake device: sizing refusals, accounting, copies
// through the device, and the exported handle another process would import.
#include "media/hbm_pool.h"

#include <gtest/gtest.h>

#include <string>

#include "device/host_device.h"

namespace tierkv {
namespace {

std::unique_ptr<Device> Gpu(DeviceRuntime& runtime, int ordinal = 0) {
  auto d = runtime.Open(ordinal);
  EXPECT_TRUE(d.ok());
  return std::move(*d);
}

TEST(HbmPoolTest, ASizeTheGpuCannotHoldIsRefusedNamingIt) {
  auto runtime = MakeHostMemoryDevices({8 << 20});
  auto too_big = HbmPool::Create(Gpu(*runtime), 16 << 20);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("--hbm-size"), std::string::npos);
  EXPECT_NE(too_big.status().message().find("GPU 0"), std::string::npos);
  EXPECT_EQ(HbmPool::Create(Gpu(*runtime), 100).status().code(), Code::kInvalidArgument);
}

TEST(HbmPoolTest, RangesAreAccountedAndBytesGoThroughTheDevice) {
  auto runtime = MakeHostMemoryDevices({8 << 20});
  auto pool = HbmPool::Create(Gpu(*runtime), (4 << 20) + 100);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  HbmPool& p = **pool;
  EXPECT_EQ(p.capacity(), 4u << 20);  // rounded down to 4 KiB
  auto a = p.Allocate(10000);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->offset % HbmPool::kAlignment, 0u);
  EXPECT_GE(p.allocated_bytes(), 10000u);
  const std::string value(10000, 'h');
  ASSERT_TRUE(p.Write(a->offset, value.data(), value.size()).ok());
  std::string back(value.size(), '\0');
  ASSERT_TRUE(p.Read(back.data(), a->offset, back.size()).ok());
  EXPECT_EQ(back, value);
  EXPECT_EQ(p.Write(p.capacity() - 10, value.data(), 20).code(), Code::kInvalidArgument);
  p.Free(*a, 10000);
  EXPECT_EQ(p.allocated_bytes(), 0u);
  EXPECT_FALSE(p.Allocate(8 << 20).has_value());  // more than the pool
}

TEST(HbmPoolTest, TheExportedHandleMapsThePoolInAnotherView) {
  auto runtime = MakeHostMemoryDevices({8 << 20});
  auto pool = HbmPool::Create(Gpu(*runtime), 1 << 20);
  ASSERT_TRUE(pool.ok());
  auto a = (*pool)->Allocate(64);
  ASSERT_TRUE(a.has_value());
  const char value[] = "stored in HBM";
  ASSERT_TRUE((*pool)->Write(a->offset, value, sizeof(value)).ok());
  std::unique_ptr<Device> engine = Gpu(*runtime);  // the engine's own view
  auto mapped = engine->Import((*pool)->handle());
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  char seen[sizeof(value)] = {};
  ASSERT_TRUE(engine->CopyToHost(seen, *mapped + a->offset, sizeof(seen)).ok());
  EXPECT_STREQ(seen, value);
  EXPECT_TRUE(engine->CloseImport(*mapped).ok());
}

TEST(HbmPoolTest, AGpuWithoutThatMuchFreeMemoryIsRefused) {
  auto runtime = MakeHostMemoryDevices({8 << 20});
  std::unique_ptr<Device> gpu = Gpu(*runtime);
  // Another process's allocation on the same device is not visible to a fresh
  // view of the fake; take the room through this view first.
  auto taken = gpu->Allocate(6 << 20);
  ASSERT_TRUE(taken.ok());
  auto pool = HbmPool::Create(std::move(gpu), 4 << 20);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), Code::kNoSpace);
  // The driver's refusal is named like the size check's.
  EXPECT_NE(pool.status().message().find("--hbm-size 4.0 MiB on GPU 0: "), std::string::npos)
      << pool.status().ToString();
}

}  // namespace
}  // namespace tierkv
