#include "store/op_stats.h"

#include <gtest/gtest.h>

namespace tierkv {
namespace {

TEST(OpStats, SingleCallsSplitSuccessFailureAndNotFound) {
  OpStats s;
  s.Record(Op::kGet, Code::kOk, 0);
  s.Record(Op::kGet, Code::kNotFound, 0);
  s.Record(Op::kGet, Code::kLeaseExpired, 1);
  s.Record(Op::kAlloc, Code::kDuplicated, 1);
  OpCounts get = s.Get(Op::kGet);
  EXPECT_EQ(get.requests, 3u);
  EXPECT_EQ(get.success, 1u);
  EXPECT_EQ(get.not_found, 1u);
  EXPECT_EQ(get.failure, 1u);
  EXPECT_EQ(s.Get(Op::kAlloc).failure, 1u);
  EXPECT_EQ(s.GetForRank(Op::kGet, 1).failure, 1u);
  EXPECT_EQ(s.GetForRank(Op::kGet, 0).requests, 2u);
  EXPECT_TRUE(s.RankSeen(1));
  EXPECT_FALSE(s.RankSeen(2));
}

TEST(OpStats, BatchOutcomeIsFailureOverNotFoundOverSuccess) {
  OpStats s;
  const Code ok_only[] = {Code::kOk, Code::kOk};
  const Code with_miss[] = {Code::kOk, Code::kNotFound};
  const Code with_error[] = {Code::kNotFound, Code::kNoSpace};
  s.RecordBatch(Op::kBatchGet, Op::kGet, ok_only, 0);
  s.RecordBatch(Op::kBatchGet, Op::kGet, with_miss, 0);
  s.RecordBatch(Op::kBatchGet, Op::kGet, with_error, 0);
  OpCounts batch = s.Get(Op::kBatchGet);
  EXPECT_EQ(batch.requests, 3u);
  EXPECT_EQ(batch.success, 1u);
  EXPECT_EQ(batch.not_found, 1u);
  EXPECT_EQ(batch.failure, 1u);
  OpCounts items = s.Get(Op::kGet);
  EXPECT_EQ(items.requests, 6u);
  EXPECT_EQ(items.success, 3u);
  EXPECT_EQ(items.not_found, 2u);
  EXPECT_EQ(items.failure, 1u);
  EXPECT_EQ(items.requests, items.success + items.failure + items.not_found);
}

TEST(OpStats, NamesFollowTheContract) {
  EXPECT_EQ(OpName(Op::kAlloc), "alloc");
  EXPECT_EQ(OpName(Op::kBatchUpdateState), "batch_update_state");
  EXPECT_EQ(OpName(Op::kBatchExistKey), "batch_exist_key");
  EXPECT_EQ(OpName(Op::kUnmount), "unmount");
}

}  // namespace
}  // namespace tierkv
