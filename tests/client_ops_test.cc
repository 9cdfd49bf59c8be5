// Every client call against a real manager, over the Unix socket (shared
// memory) and over TCP (inline bytes).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;

std::string Pattern(size_t n, uint32_t seed) { return testing::RandomBytes(n, seed); }

class ClientOpsTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    // A small frame limit (8 MiB + 1 MiB) so large batches must be split.
    manager_ = new ManagerProcess({"--max-object-bytes", "8MiB"});
  }
  static void TearDownTestSuite() {
    delete manager_;
    manager_ = nullptr;
  }
  void SetUp() override {
    // A fresh tenant per test keeps tests independent on the shared manager.
    tenant_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (auto& ch : tenant_) ch = ch == '/' ? '-' : ch;
    tenant_ += GetParam() ? "-uds" : "-tcp";
    client_ = Connect();
  }
  std::unique_ptr<Client> Connect() {
    auto c = Client::Connect(GetParam() ? manager_->uds() : manager_->tcp());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  WriteOptions W(std::string_view group = {}) { return WriteOptions{tenant_, group}; }

  static ManagerProcess* manager_;
  std::string tenant_;
  std::unique_ptr<Client> client_;
};
ManagerProcess* ClientOpsTest::manager_ = nullptr;

TEST_P(ClientOpsTest, TransportIsWhatTheAddressSays) {
  EXPECT_EQ(client_->shared_memory(), GetParam());
  EXPECT_EQ(client_->max_key_bytes(), 1024u);
}

TEST_P(ClientOpsTest, PutGetRoundTripsBinaryValuesOfManySizes) {
  for (size_t size : {1ul, 100ul, 4096ul, 65536ul, 1ul << 20, 4ul << 20}) {
    const std::string key = "obj-" + std::to_string(size);
    const std::string value = Pattern(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(client_->Put(key, value, W()).ok()) << size;
    auto got = client_->Get(key, tenant_);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, value) << size;
    std::string buf(size + 10, 'x');
    auto n = client_->Get(key, buf.data(), buf.size(), tenant_);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, size);
    EXPECT_EQ(buf.substr(0, size), value);
  }
}

TEST_P(ClientOpsTest, DuplicatedUpsertAndMisses) {
  ASSERT_TRUE(client_->Put("k", "one", W()).ok());
  EXPECT_EQ(client_->Put("k", "two", W()).code(), Code::kDuplicated);
  EXPECT_EQ(*client_->Get("k", tenant_), "one");
  ASSERT_TRUE(client_->Upsert("k", "three", W()).ok());
  EXPECT_EQ(*client_->Get("k", tenant_), "three");
  EXPECT_EQ(client_->Get("missing", tenant_).code(), Code::kNotFound);
  EXPECT_EQ(client_->Get("k").code(), Code::kNotFound);  // other tenant
}

TEST_P(ClientOpsTest, BufferTooSmallIsTooLargeAndCopiesNothing) {
  ASSERT_TRUE(client_->Put("k", std::string(100, 'v'), W()).ok());
  std::string buf(10, '-');
  auto r = client_->Get("k", buf.data(), buf.size(), tenant_);
  EXPECT_EQ(r.code(), Code::kTooLarge);
  EXPECT_NE(r.status().message().find("100 bytes"), std::string::npos);
  EXPECT_EQ(buf, std::string(10, '-'));
}

TEST_P(ClientOpsTest, ExistQueryRemove) {
  ASSERT_TRUE(client_->Put("k", "value", W("grp")).ok());
  EXPECT_TRUE(client_->Exist("k", tenant_).ok());
  auto info = client_->Query("k", tenant_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 5u);
  EXPECT_EQ(info->group_id, "grp");
  EXPECT_EQ(info->media, MediumBit(Medium::kDram));
  EXPECT_EQ(info->active_leases, 0u);
  EXPECT_TRUE(client_->Remove("k", tenant_).ok());
  EXPECT_EQ(client_->Exist("k", tenant_).code(), Code::kNotFound);
  EXPECT_EQ(client_->Query("k", tenant_).code(), Code::kNotFound);
  EXPECT_EQ(client_->Remove("k", tenant_).code(), Code::kNotFound);
}

TEST_P(ClientOpsTest, BatchCallsReturnOneStatusPerItemInOrder) {
  const std::string big = Pattern(1 << 20, 7);
  std::vector<PutItem> items = {
      {"a", "AAA", 3, {}}, {"b", big.data(), big.size(), "g"}, {"", "x", 1, {}}, {"c", "C", 1, {}}};
  ASSERT_TRUE(client_->Put("c", "existing", W()).ok());
  std::vector<Status> put = client_->BatchPut(items, tenant_);
  ASSERT_EQ(put.size(), 4u);
  EXPECT_TRUE(put[0].ok());
  EXPECT_TRUE(put[1].ok());
  EXPECT_EQ(put[2].code(), Code::kInvalidArgument);
  EXPECT_EQ(put[3].code(), Code::kDuplicated);

  std::vector<std::string_view> keys = {"b", "zzz", "a", "c"};
  auto got = client_->BatchGet(keys, tenant_);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(*got[0], big);
  EXPECT_EQ(got[1].code(), Code::kNotFound);
  EXPECT_EQ(*got[2], "AAA");
  EXPECT_EQ(*got[3], "existing");

  std::string b1(1 << 20, 0), b2(2, 0);
  std::vector<GetItem> into = {{"b", b1.data(), b1.size()}, {"a", b2.data(), b2.size()}};
  auto n = client_->BatchGet(into, tenant_);
  EXPECT_EQ(*n[0], big.size());
  EXPECT_EQ(b1, big);
  EXPECT_EQ(n[1].code(), Code::kTooLarge);
  // Exact size: a value smaller than its target fails and copies nothing.
  std::string page(8, '-');
  GetItem exact{"a", page.data(), page.size()};
  exact.exact_size = true;
  auto e = client_->BatchGet(std::span<const GetItem>(&exact, 1), tenant_);
  EXPECT_EQ(e[0].code(), Code::kInvalidArgument);
  EXPECT_EQ(page, "--------");
  GetItem fits{"a", page.data(), 3};
  fits.exact_size = true;
  EXPECT_EQ(*client_->BatchGet(std::span<const GetItem>(&fits, 1), tenant_)[0], 3u);
  EXPECT_EQ(page.substr(0, 3), "AAA");

  auto exist = client_->BatchExist(keys, tenant_);
  EXPECT_TRUE(exist[0].ok());
  EXPECT_EQ(exist[1].code(), Code::kNotFound);
  auto infos = client_->BatchQuery(keys, tenant_);
  EXPECT_EQ(infos[0]->size, big.size());
  EXPECT_EQ(infos[0]->group_id, "g");
  EXPECT_EQ(infos[1].code(), Code::kNotFound);
  auto removed = client_->BatchRemove(keys, tenant_);
  EXPECT_TRUE(removed[0].ok());
  EXPECT_EQ(removed[1].code(), Code::kNotFound);
  EXPECT_TRUE(removed[2].ok());
  EXPECT_TRUE(removed[3].ok());
  EXPECT_TRUE(client_->ListKeys(tenant_)->keys.empty());
}

TEST_P(ClientOpsTest, LargeBatchesAreSplitIntoChunks) {
  // More bytes than one frame holds inline (9 MiB here) and more keys than
  // max-batch (4096).
  std::vector<std::string> keys;
  std::vector<PutItem> items;
  const std::string value = Pattern(4 << 10, 3);
  for (int i = 0; i < 5000; ++i) keys.push_back("key-" + std::to_string(i));
  for (const auto& k : keys) items.push_back({k, value.data(), value.size(), {}});
  for (const Status& st : client_->BatchPut(items, tenant_)) ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string_view> views(keys.begin(), keys.end());
  auto got = client_->BatchGet(views, tenant_);
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(*g, value);
  }
  EXPECT_EQ(client_->ListKeys(tenant_)->keys.size(), 5000u);
  EXPECT_TRUE(client_->RemoveAll(tenant_)->cleared);
}

TEST_P(ClientOpsTest, ListKeysWithPrefixAndLimit) {
  for (const char* k : {"p/1", "p/2", "q/1", "p/3"}) ASSERT_TRUE(client_->Put(k, "v", W()).ok());
  auto all = client_->ListKeys(tenant_);
  EXPECT_EQ(all->keys, (std::vector<std::string>{"p/1", "p/2", "p/3", "q/1"}));
  auto p = client_->ListKeys(tenant_, "p/", 2);
  EXPECT_EQ(p->keys, (std::vector<std::string>{"p/1", "p/2"}));
  EXPECT_FALSE(p->truncated);
}

TEST_P(ClientOpsTest, RemoveAllEmptiesOnlyTheTenant) {
  ASSERT_TRUE(client_->Put("a", "1", W()).ok());
  ASSERT_TRUE(client_->Put("b", "2", W()).ok());
  ASSERT_TRUE(client_->Put("a", "other", WriteOptions{tenant_ + "-x", {}}).ok());
  auto r = client_->RemoveAll(tenant_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->removed, 2u);
  EXPECT_EQ(r->skipped, 0u);
  EXPECT_TRUE(r->cleared);
  EXPECT_EQ(*client_->Get("a", tenant_ + "-x"), "other");
  auto again = client_->RemoveAll(tenant_);
  EXPECT_EQ(again->removed, 0u);
  EXPECT_FALSE(again->cleared);
}

TEST_P(ClientOpsTest, ConcurrentClientsSeeTheirOwnWrites) {
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto c = Connect();
      if (!c) {
        ++errors;
        return;
      }
      for (int i = 0; i < 200; ++i) {
        const std::string key = std::to_string(t) + "/" + std::to_string(i);
        const std::string value = Pattern(1000 + i * 50, t * 1000 + i);
        if (!c->Put(key, value, W()).ok()) ++errors;
        auto got = c->Get(key, tenant_);
        if (!got.ok() || *got != value) ++errors;
      }
    });
  }
  // One client shared by two threads is also safe (calls are serialised).
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const std::string key = "shared/" + std::to_string(t) + "/" + std::to_string(i);
        if (!client_->Put(key, key, W()).ok()) ++errors;
        auto got = client_->Get(key, tenant_);
        if (!got.ok() || *got != key) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(client_->ListKeys(tenant_)->keys.size(), 4u * 200 + 200);
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientOpsTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Uds" : "Tcp"; });

}  // namespace
}  // namespace tierkv
