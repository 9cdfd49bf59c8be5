#include "store/key_rules.h"

#include <gtest/gtest.h>

#include <string>

namespace tierkv {
namespace {

TEST(KeyRulesTest, TheLimitsOfTheOptionsDecide) {
  StoreOptions o;
  o.max_key_bytes = 8;
  o.max_object_bytes = 100;
  o.max_group_bytes = 4;
  const KeyRules rules(o);
  EXPECT_TRUE(rules.Ref({"t", "12345678"}).ok());
  EXPECT_EQ(rules.Key("123456789").code(), Code::kTooLarge);
  EXPECT_EQ(rules.Key("").code(), Code::kInvalidArgument);
  EXPECT_EQ(rules.Tenant("").code(), Code::kInvalidArgument);
  EXPECT_EQ(rules.Tenant(std::string("a\0b", 3)).code(), Code::kInvalidArgument);
  EXPECT_EQ(rules.Tenant(std::string(129, 't')).code(), Code::kTooLarge);
  EXPECT_EQ(rules.Ref({"", "123456789"}).code(), Code::kInvalidArgument);  // the tenant first
  EXPECT_TRUE(rules.Put("k", 100, {"abcd"}).ok());
  EXPECT_EQ(rules.Put("k", 0, {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(rules.Put("k", 101, {}).code(), Code::kTooLarge);
  EXPECT_EQ(rules.Put("k", 1, {"abcde"}).code(), Code::kTooLarge);
}

}  // namespace
}  // namespace tierkv
