#include "http/rest_body.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

TEST(ParseChunkRequest, AcceptsTheContractBodies) {
  ChunkRequest c;
  ASSERT_TRUE(
      ParseChunkRequest(
          R"({"chunk_hashes": ["a", "b"], "locations": ["LocalCPUBackend"], "tenant_id": "t"})", &c)
          .ok());
  EXPECT_EQ(c.keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.has_locations);
  EXPECT_EQ(c.tenant, "t");
  ChunkRequest p;
  ASSERT_TRUE(ParseChunkRequest(R"({"chunk_hashes": ["x"], "lookup_id": "req_001"})", &p).ok());
  EXPECT_EQ(p.lookup_id, "req_001");
  EXPECT_EQ(p.tenant, "default");
  EXPECT_FALSE(p.has_locations);
}

TEST(ParseChunkRequest, RejectsBadBodiesWithTheRealCause) {
  const std::pair<const char*, const char*> cases[] = {
      {"{nope", "invalid JSON body"},
      // Found by fuzzing: a number too large for a double throws out_of_range,
      // not parse_error, and escaped as an internal error.
      {"6e6666", "invalid JSON body"},
      {"[1]", "must be an object"},
      {"{}", "missing chunk_hashes"},
      {R"({"chunk_hashes": "a"})", "array of strings"},
      {R"({"chunk_hashes": ["a", 1]})", "non-empty strings"},
      {R"({"chunk_hashes": [""]})", "non-empty strings"},
      {R"({"chunk_hashes": [], "tenant_id": 3})", "tenant_id must be a string"},
      {R"({"chunk_hashes": [], "locations": "x"})", "locations must be an array"},
      {R"({"chunk_hashes": [], "lookup_id": 1})", "lookup_id must be a string"},
  };
  for (const auto& [body, fragment] : cases) {
    ChunkRequest c;
    Status st = ParseChunkRequest(body, &c);
    ASSERT_FALSE(st.ok()) << body;
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(fragment), std::string::npos) << body << ": " << st.message();
  }
}

TEST(SplitKeys, KeepsEmptyPieces) {
  EXPECT_EQ(SplitKeys("a,b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitKeys("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(SplitKeys(""), (std::vector<std::string>{""}));
}

}  // namespace
}  // namespace tierkv
