#include "common/units.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

TEST(ParseByteSize, PlainNumbersAreBytes) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize(" 12 "), 12u);
}

TEST(ParseByteSize, UnitsAreBinaryAndCaseInsensitive) {
  EXPECT_EQ(*ParseByteSize("4gb"), 4ull << 30);
  EXPECT_EQ(*ParseByteSize("4GB"), 4ull << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("512 mib"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("64k"), 64ull << 10);
  EXPECT_EQ(*ParseByteSize("1t"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("100b"), 100u);
  EXPECT_EQ(*ParseByteSize("1.5g"), 3ull << 29);
}

TEST(ParseByteSize, RejectsGarbageWithTheText) {
  for (const char* bad : {"", "gb", "12xb", "-1", "1..2g", "abc", "1.5"}) {
    Result<uint64_t> r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("invalid size"), std::string::npos);
  }
  EXPECT_FALSE(ParseByteSize("99999999999t").ok());
}

TEST(FormatByteSize, PicksTheLargestUnit) {
  EXPECT_EQ(FormatByteSize(100), "100 B");
  EXPECT_EQ(FormatByteSize(1ull << 30), "1.0 GiB");
  EXPECT_EQ(FormatByteSize(1536ull << 10), "1.5 MiB");
}

TEST(Status, NamesEveryCode) {
  for (uint16_t c = 0; c <= kMaxCode; ++c) {
    EXPECT_NE(CodeName(static_cast<Code>(c)), "UNKNOWN") << c;
  }
  EXPECT_EQ(Status(Code::kNotFound, "key 'a'").ToString(), "NOT_FOUND: key 'a'");
  EXPECT_TRUE(IsBackpressure(Code::kNoSpace));
  EXPECT_TRUE(IsBackpressure(Code::kRetry));
  EXPECT_FALSE(IsBackpressure(Code::kDuplicated));
}

}  // namespace
}  // namespace tierkv
