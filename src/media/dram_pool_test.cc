#include "media/dram_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

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

// Freeing a range advances the generation of its first page, and of nothing
// else; the table's descriptor can be mapped read-only only, and neither
// memfd can change size.
TEST(DramPool, FreeAdvancesTheGenerationOfTheRangesFirstPageOnly) {
  auto pool = DramPool::Create(8 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  DramPool& p = **pool;
  ASSERT_EQ(p.generations_bytes(), (8u << 20) / DramPool::kGenerationPageBytes * 4);
  auto a = p.Allocate(3 * 4096);
  auto b = p.Allocate(4096);
  ASSERT_TRUE(a.has_value() && b.has_value());
  ASSERT_EQ(a->offset % DramPool::kGenerationPageBytes, 0u);
  const uint32_t a0 = p.Generation(a->offset), a1 = p.Generation(a->offset + 4096);
  const uint32_t b0 = p.Generation(b->offset);
  p.Free(*a, 3 * 4096);
  EXPECT_EQ(p.Generation(a->offset), a0 + 1);
  EXPECT_EQ(p.Generation(a->offset + 100), a0 + 1);  // the same page
  EXPECT_EQ(p.Generation(a->offset + 4096), a1);
  EXPECT_EQ(p.Generation(b->offset), b0);
  p.Free(*b, 4096);
  EXPECT_EQ(p.Generation(b->offset), b0 + 1);

  // Another process's view of the table, through the descriptor.
  void* ro = mmap(nullptr, p.generations_bytes(), PROT_READ, MAP_SHARED, p.generations_fd(), 0);
  ASSERT_NE(ro, MAP_FAILED);
  const auto* table = static_cast<const uint32_t*>(ro);
  EXPECT_EQ(table[b->offset / DramPool::kGenerationPageBytes], b0 + 1);
  munmap(ro, p.generations_bytes());
  EXPECT_EQ(mmap(nullptr, p.generations_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
                 p.generations_fd(), 0),
            MAP_FAILED);
  const char byte = 1;
  EXPECT_LT(pwrite(p.generations_fd(), &byte, 1, 0), 0);
  EXPECT_NE(ftruncate(p.generations_fd(), 0), 0);
  EXPECT_NE(ftruncate(p.fd(), 0), 0);
  EXPECT_NE(ftruncate(p.fd(), 16 << 20), 0);
  EXPECT_EQ(p.capacity(), 8u << 20);
}

// The kernel's shmem huge page policy, the bracketed word of shmem_enabled
// ("" when the file is missing: no transparent huge pages at all).
std::string ShmemHugePagePolicy() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = text.find('['), close = text.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

TEST(DramPool, HugePagesAreWhatTheKernelPolicyGrants) {
  const std::string policy = ShmemHugePagePolicy();
  auto asked = DramPool::Create(16 << 20, /*huge_pages=*/true);
  auto plain = DramPool::Create(16 << 20);
  ASSERT_TRUE(asked.ok() && plain.ok());
  // Whatever the pages, the pool works the same: written bytes read back.
  auto e = (*asked)->Allocate(3 << 20);
  ASSERT_TRUE(e.has_value());
  std::memset((*asked)->base() + e->offset, 0x5a, e->size);
  EXPECT_EQ((*asked)->base()[e->offset + e->size - 1], 0x5a);
  EXPECT_LE((*asked)->huge_page_bytes(), (*asked)->capacity());
  if (policy == "advise" || policy == "always" || policy == "within_size" || policy == "force") {
    EXPECT_GT((*asked)->huge_page_bytes(), 0u) << "policy " << policy;
  } else {
    EXPECT_EQ((*asked)->huge_page_bytes(), 0u) << "policy '" << policy << "'";
  }
  // Without the advice only a policy that forces huge pages gives them.
  if (policy != "always" && policy != "force") {
    EXPECT_EQ((*plain)->huge_page_bytes(), 0u);
  }
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
