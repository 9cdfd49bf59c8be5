// Scatter/gather objects (BatchPutParts / BatchGetParts) against a real
// manager, over the Unix socket (shared memory) and over TCP (inline bytes).
#include <gtest/gtest.h>

#include <numeric>

#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;

class ScatterGatherTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() { manager_ = new ManagerProcess({"--max-object-bytes", "8MiB"}); }
  static void TearDownTestSuite() {
    delete manager_;
    manager_ = nullptr;
  }
  void SetUp() override {
    tenant_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (auto& ch : tenant_) ch = ch == '/' ? '-' : ch;
    auto c = Client::Connect(GetParam() ? manager_->uds() : manager_->tcp());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }

  // Cuts `value` into parts of the given sizes (which add up to its size).
  static std::vector<ConstRegion> Cut(const std::string& value, const std::vector<size_t>& sizes) {
    std::vector<ConstRegion> parts;
    size_t at = 0;
    for (size_t n : sizes) {
      parts.push_back({value.data() + at, n});
      at += n;
    }
    EXPECT_EQ(at, value.size());
    return parts;
  }
  static std::vector<Region> Slots(std::string& buf, const std::vector<size_t>& sizes) {
    std::vector<Region> parts;
    size_t at = 0;
    for (size_t n : sizes) {
      parts.push_back({buf.data() + at, n});
      at += n;
    }
    return parts;
  }

  static ManagerProcess* manager_;
  std::string tenant_;
  std::unique_ptr<Client> client_;
};
ManagerProcess* ScatterGatherTest::manager_ = nullptr;

TEST_P(ScatterGatherTest, AnObjectIsTheConcatenationOfItsPartsAndScattersIntoAnySplit) {
  // A layer_first page: 64 parts (K and V of 32 layers), and a few odd splits.
  std::vector<size_t> page(64, 4096);
  std::vector<size_t> odd = {1, 0, 4095, 100000, 3};
  const std::string a = testing::RandomBytes(64 * 4096, 1);
  const std::string b = testing::RandomBytes(std::accumulate(odd.begin(), odd.end(), 0ul), 2);
  const auto pa = Cut(a, page);
  const auto pb = Cut(b, odd);
  std::vector<PutPartsItem> put = {{"page", pa, {}}, {"odd", pb, "g1"}};
  for (const Status& st : client_->BatchPutParts(put, tenant_))
    ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*client_->Get("page", tenant_), a);
  EXPECT_EQ(*client_->Get("odd", tenant_), b);
  EXPECT_EQ(client_->Query("odd", tenant_)->group_id, "g1");

  std::string ga(a.size(), '\0'), gb(b.size(), '\0');
  const auto sa = Slots(ga, {a.size() / 2, a.size() - a.size() / 2});
  const auto sb = Slots(gb, odd);
  std::vector<GetPartsItem> get = {{"page", sa}, {"odd", sb}};
  auto got = client_->BatchGetParts(get, tenant_);
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  ASSERT_TRUE(got[1].ok()) << got[1].status().ToString();
  EXPECT_EQ(*got[0], a.size());
  EXPECT_EQ(ga, a);
  EXPECT_EQ(gb, b);
}

TEST_P(ScatterGatherTest, AnotherTotalSizeFailsTheItemAndCopiesNothing) {
  const std::string v = testing::RandomBytes(8192, 3);
  const auto parts = Cut(v, {4096, 4096});
  std::vector<PutPartsItem> put = {{"v", parts, {}}};
  ASSERT_TRUE(client_->BatchPutParts(put, tenant_)[0].ok());
  std::string small(8191, 'x'), big(8193, 'y'), exact(8192, '\0');
  const auto s = Slots(small, {4096, 4095});
  const auto l = Slots(big, {8193});
  const auto e = Slots(exact, {8192});
  std::vector<GetPartsItem> get = {{"v", s}, {"v", l}, {"missing", e}, {"v", e}};
  auto got = client_->BatchGetParts(get, tenant_);
  EXPECT_EQ(got[0].code(), Code::kInvalidArgument);
  EXPECT_EQ(got[1].code(), Code::kInvalidArgument);
  EXPECT_EQ(got[2].code(), Code::kNotFound);
  ASSERT_TRUE(got[3].ok());
  EXPECT_EQ(small, std::string(8191, 'x'));
  EXPECT_EQ(big, std::string(8193, 'y'));
  EXPECT_EQ(exact, v);
}

TEST_P(ScatterGatherTest, SingleObjectCalls) {
  const std::string v = testing::RandomBytes(3 * 4096, 5);
  const auto parts = Cut(v, {4096, 8192});
  ASSERT_TRUE(client_->PutParts("one", parts, {tenant_, "g"}).ok());
  EXPECT_EQ(client_->PutParts("one", parts, {tenant_, {}}).code(), Code::kDuplicated);
  std::string back(v.size(), '\0');
  const auto slots = Slots(back, {1, v.size() - 1});
  auto n = client_->GetParts("one", slots, tenant_);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, v.size());
  EXPECT_EQ(back, v);
  EXPECT_EQ(client_->GetParts("none", slots, tenant_).code(), Code::kNotFound);
}

TEST_P(ScatterGatherTest, ExistingKeysAreDuplicatedUnlessUpserted) {
  const std::string one = "first value", two = "second value!";
  const auto p1 = Cut(one, {5, 6});
  const auto p2 = Cut(two, {6, 7});
  std::vector<PutPartsItem> first = {{"k", p1, {}}};
  std::vector<PutPartsItem> second = {{"k", p2, {}}};
  ASSERT_TRUE(client_->BatchPutParts(first, tenant_)[0].ok());
  EXPECT_EQ(client_->BatchPutParts(second, tenant_)[0].code(), Code::kDuplicated);
  EXPECT_EQ(*client_->Get("k", tenant_), one);
  ASSERT_TRUE(client_->BatchPutParts(second, tenant_, /*upsert=*/true)[0].ok());
  EXPECT_EQ(*client_->Get("k", tenant_), two);
}

TEST_P(ScatterGatherTest, LargeBatchesAreSplitIntoChunks) {
  // 24 objects of 1 MiB in 16 parts: more than one 9 MiB frame over TCP.
  std::vector<std::string> values;
  std::vector<std::vector<ConstRegion>> parts;
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < 24; ++i) {
    values.push_back(testing::RandomBytes(1 << 20, 100 + i));
    keys.push_back("big" + std::to_string(i));
  }
  std::vector<PutPartsItem> put;
  for (uint32_t i = 0; i < 24; ++i) {
    parts.push_back(Cut(values[i], std::vector<size_t>(16, 65536)));
  }
  for (uint32_t i = 0; i < 24; ++i) put.push_back({keys[i], parts[i], {}});
  for (const Status& st : client_->BatchPutParts(put, tenant_))
    ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> back(24, std::string(1 << 20, '\0'));
  std::vector<std::vector<Region>> slots;
  std::vector<GetPartsItem> get;
  for (uint32_t i = 0; i < 24; ++i)
    slots.push_back(Slots(back[i], std::vector<size_t>(4, 1 << 18)));
  for (uint32_t i = 0; i < 24; ++i) get.push_back({keys[i], slots[i]});
  auto got = client_->BatchGetParts(get, tenant_);
  for (uint32_t i = 0; i < 24; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << " " << got[i].status().ToString();
    EXPECT_EQ(back[i], values[i]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ScatterGatherTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "uds" : "tcp"; });

}  // namespace
}  // namespace tierkv
