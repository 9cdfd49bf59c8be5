// The Device seam: the host-memory fake (allocation, copies each way, IPC
// export and import sharing the bytes) and the CUDA driver loader's refusals
// on a host without a driver (a missing library, the toolkit's stub).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device/cuda_device.h"
#include "device/host_device.h"

namespace tierkv {
namespace {

TEST(HostMemoryDevicesTest, MemoryIsAccountedAndCopiesGoEachWay) {
  auto runtime = MakeHostMemoryDevices({1 << 20, 2 << 20});
  ASSERT_EQ(runtime->count(), 2);
  EXPECT_EQ(runtime->Open(2).status().code(), Code::kInvalidArgument);
  auto dev = runtime->Open(1);
  ASSERT_TRUE(dev.ok());
  Device& d = **dev;
  EXPECT_EQ(d.ordinal(), 1);
  EXPECT_EQ(d.total_bytes(), 2u << 20);
  auto a = d.Allocate(1 << 20);
  auto b = d.Allocate(1 << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(d.Allocate(1).status().code(), Code::kNoSpace);  // 2 MiB taken
  const std::string in = "bytes through the device";
  ASSERT_TRUE(d.CopyToDevice(*a + 100, in.data(), in.size()).ok());
  ASSERT_TRUE(d.CopyOnDevice(*b, *a + 100, in.size()).ok());
  std::string out(in.size(), '\0');
  ASSERT_TRUE(d.CopyToHost(out.data(), *b, out.size()).ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE(d.Free(*a).ok());
  EXPECT_EQ(d.Free(*a).code(), Code::kInvalidArgument);
  EXPECT_TRUE(d.Allocate(1 << 20).ok());  // its room is back
}

TEST(HostMemoryDevicesTest, AnImportedHandleMapsTheSameBytes) {
  auto runtime = MakeHostMemoryDevices({1 << 20});
  auto owner = runtime->Open(0);
  auto engine = runtime->Open(0);  // another process's view of the device
  ASSERT_TRUE(owner.ok() && engine.ok());
  auto pool = (*owner)->Allocate(64 << 10);
  ASSERT_TRUE(pool.ok());
  auto handle = (*owner)->Export(*pool);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ((*owner)->Export(*pool + 8).status().code(), Code::kInvalidArgument);
  auto mapped = (*engine)->Import(*handle);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  const char value[] = "written by the engine";
  ASSERT_TRUE((*engine)->CopyToDevice(*mapped + 4096, value, sizeof(value)).ok());
  char seen[sizeof(value)] = {};
  ASSERT_TRUE((*owner)->CopyToHost(seen, *pool + 4096, sizeof(seen)).ok());
  EXPECT_STREQ(seen, value);
  ASSERT_TRUE((*engine)->CloseImport(*mapped).ok());
  EXPECT_EQ((*engine)->CloseImport(*mapped).code(), Code::kInvalidArgument);

  IpcHandle junk;
  junk.bytes.fill(0x5a);
  EXPECT_EQ((*engine)->Import(junk).status().code(), Code::kInvalidArgument);
}

TEST(CudaDriverTest, ThisBuildDrivesCudaWhenTheToolkitIsThere) {
  EXPECT_EQ(BuiltWithCuda(), static_cast<bool>(TIERKV_EXPECT_CUDA));
  EXPECT_TRUE(BuiltWithCuda()) << "the CUDA toolkit (cuda.h) was not found at build time";
}

TEST(CudaDriverTest, NoDriverLibraryIsRefusedNamingTheCause) {
  auto r = LoadCudaDriver("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("no NVIDIA driver"), std::string::npos)
      << r.status().ToString();
}

TEST(CudaDriverTest, TheToolkitsStubLibraryIsNotTakenForADriver) {
  const std::string stub = TIERKV_CUDA_STUB;
  ASSERT_NE(stub.find("libcuda"), std::string::npos)
      << "the CUDA toolkit's stub libcuda.so was not found at build time";
  auto r = LoadCudaDriver(stub);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("stub library"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace tierkv
