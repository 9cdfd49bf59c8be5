// PrefetchBucket: any bucket of any map, empty ones included, and the map is
// left as it was.
#include "common/prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace tierkv {
namespace {

TEST(PrefetchBucket, TouchesEveryBucketAndChangesNothing) {
  std::unordered_map<std::string, std::string> empty;
  for (size_t b = 0; b < empty.bucket_count(); ++b) PrefetchBucket(empty, b);
  EXPECT_TRUE(empty.empty());

  std::unordered_map<std::string, std::string> map;
  for (int i = 0; i < 1000; ++i) map["key-" + std::to_string(i)] = std::string(100, 'v');
  const auto before = map;
  for (size_t b = 0; b < map.bucket_count(); ++b) PrefetchBucket(map, b);
  PrefetchBucket(map, map.bucket("key-7"));
  PrefetchBucket(map, map.bucket("absent"));
  EXPECT_EQ(map, before);

  std::unordered_set<uint64_t> set = {1, 2, 3};
  for (size_t b = 0; b < set.bucket_count(); ++b) PrefetchBucket(set, b);
  EXPECT_EQ(set.size(), 3u);
}

}  // namespace
}  // namespace tierkv
