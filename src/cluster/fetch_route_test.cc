#include "cluster/fetch_route.h"

#include <gtest/gtest.h>

#include <vector>

namespace tierkv {
namespace {

RemoteLocation At(const char* owner, Medium medium, bool complete = true) {
  RemoteLocation l;
  l.owner = owner;
  l.medium = medium;
  l.complete = complete;
  return l;
}

TEST(FetchRouteTest, DramBeforeSsdThenFewerBytesInFlightThenACompleteView) {
  const RemoteLocation a = At("a", Medium::kSsd), b = At("b", Medium::kDram),
                       c = At("c", Medium::kDram), d = At("d", Medium::kDram, false);
  std::vector<RouteCandidate> cands = {{&a, 0}, {&b, 100}, {&c, 50}};
  EXPECT_EQ(PickRoute(cands), 2u);  // c: DRAM, fewer in flight than b
  cands = {{&a, 0}, {&b, 10}};
  EXPECT_EQ(PickRoute(cands), 1u);  // DRAM wins over an idle SSD owner
  cands = {{&d, 5}, {&c, 5}};
  EXPECT_EQ(PickRoute(cands), 1u);  // the complete view
  cands = {{&b, 5}, {&c, 5}};
  EXPECT_EQ(PickRoute(cands), 0u);  // the first of equals
  EXPECT_EQ(PickRoute({}), std::nullopt);
}

TEST(FetchRouteTest, NoRouteSaysWhy) {
  IndexLookup named;
  named.locations.push_back(At("a", Medium::kDram));
  EXPECT_EQ(NoRoute(named).code(), Code::kNotFound);
  EXPECT_NE(NoRoute(named).message().find("not reachable"), std::string::npos);
  IndexLookup unknown;
  unknown.incomplete_owner = "node-b";
  EXPECT_NE(NoRoute(unknown).message().find("node-b is incomplete"), std::string::npos);
  IndexLookup absent;
  absent.absence_proved = true;
  EXPECT_NE(NoRoute(absent).message().find("not held by any other manager"), std::string::npos);
}

TEST(FetchRouteTest, SegmentsEndWhereTheNextItemWouldPassALimit) {
  const SegmentLimits limits{3, 100, 20};
  std::vector<SegmentItem> items(7, {10, 2});
  EXPECT_EQ(CutSegments(items, limits), (std::vector<size_t>{0, 3, 6}));  // 3 items each
  items = {{60, 1}, {50, 1}, {10, 1}, {200, 1}, {1, 1}};
  EXPECT_EQ(CutSegments(items, limits), (std::vector<size_t>{0, 1, 3, 4}));  // bytes; big alone
  items = {{1, 15}, {1, 10}, {1, 5}};
  EXPECT_EQ(CutSegments(items, limits), (std::vector<size_t>{0, 1}));  // key bytes
  EXPECT_TRUE(CutSegments({}, limits).empty());
}

}  // namespace
}  // namespace tierkv
