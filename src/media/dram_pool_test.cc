#include "media/dram_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

namespace tierkv {
namespace {

TEST(DramPool, SecondMappingOfTheFdSeesTheSameBytes) {
  auto pool = DramPool::Create(8 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  DramPool& p = **pool;
  EXPECT_EQ(p.capacity(), 8u << 20);
  auto e = p.Allocate(1000);
  ASSERT_TRUE(e.has_value());
  void* other = mmap(nullptr, p.capacity(), PROT_READ | PROT_WRITE, MAP_SHARED, p.fd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  std::memcpy(static_cast<uint8_t*>(other) + e->offset, "written elsewhere", 17);
  EXPECT_EQ(std::memcmp(p.base() + e->offset, "written elsewhere", 17), 0);
  munmap(other, p.capacity());
}

TEST(DramPool, RejectsZeroSize) {
  auto pool = DramPool::Create(100);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.code(), Code::kInvalidArgument);
}

TEST(DramPool, FaultHookFailsAllocations) {
  auto pool = DramPool::Create(8 << 20);
  ASSERT_TRUE(pool.ok());
  (*pool)->SetAllocationFaultHook([](uint64_t size) { return size > 4096; });
  EXPECT_TRUE((*pool)->Allocate(4096).has_value());
  EXPECT_FALSE((*pool)->Allocate(8192).has_value());
}

}  // namespace
}  // namespace tierkv
