// Pinned (zero-copy) reads against a real manager: Client::Pin / Unpin.
#include <gtest/gtest.h>

#include <cstring>

#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;

constexpr size_t kMiB = 1 << 20;

std::string Filled(char c, size_t n = kMiB) { return std::string(n, c); }

std::string Bytes(const PinnedValue& v) {
  return std::string(reinterpret_cast<const char*>(v.data), v.size);
}

class PinTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    manager_ = new ManagerProcess({"--dram-size", "8MiB", "--max-pinned-bytes", "2MiB"});
  }
  static void TearDownTestSuite() {
    delete manager_;
    manager_ = nullptr;
  }
  static std::unique_ptr<Client> Connect(bool unix_socket = true) {
    auto c = Client::Connect(unix_socket ? manager_->uds() : manager_->tcp());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Puts enough other values to cycle the whole pool: every unpinned range is
  // evicted and reused.
  static void Churn(Client& c) {
    for (int i = 0; i < 24; ++i) {
      ASSERT_TRUE(c.Upsert("churn" + std::to_string(i % 12), Filled('a' + i % 26)).ok());
    }
  }
  static ManagerProcess* manager_;
};
ManagerProcess* PinTest::manager_ = nullptr;

TEST_F(PinTest, APinnedValueStaysInPlaceThroughUpsertRemoveAndEviction) {
  auto c = Connect();
  ASSERT_TRUE(c->Upsert("pinned", Filled('p')).ok());
  Result<PinnedValue> v = c->Pin("pinned");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->size, kMiB);
  EXPECT_TRUE(c->PinHeld(*v));
  ASSERT_TRUE(c->Upsert("pinned", Filled('q')).ok());
  EXPECT_EQ(*c->Get("pinned"), Filled('q'));  // readers see the new value
  ASSERT_TRUE(c->Remove("pinned").ok());
  Churn(*c);
  EXPECT_EQ(Bytes(*v), Filled('p'));  // the pin's bytes never changed
  EXPECT_TRUE(c->Unpin(*v).ok());
}

TEST_F(PinTest, APinnedValueIsNotEvicted) {
  auto c = Connect();
  ASSERT_TRUE(c->Upsert("kept", Filled('k')).ok());
  Result<PinnedValue> v = c->Pin("kept");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  Churn(*c);
  EXPECT_EQ(Bytes(*v), Filled('k'));
  EXPECT_EQ(*c->Get("kept"), Filled('k'));  // still stored: eviction passed it over
  ASSERT_TRUE(c->Unpin(*v).ok());
}

TEST_F(PinTest, AConnectionsPinsAreBoundedAndUnpinGivesTheBudgetBack) {
  auto c = Connect();
  ASSERT_TRUE(c->Upsert("b1", Filled('1')).ok());
  ASSERT_TRUE(c->Upsert("b2", Filled('2')).ok());
  ASSERT_TRUE(c->Upsert("b3", Filled('3')).ok());
  Result<PinnedValue> one = c->Pin("b1");
  Result<PinnedValue> two = c->Pin("b2");
  ASSERT_TRUE(one.ok() && two.ok());
  Result<PinnedValue> three = c->Pin("b3");
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), Code::kNoSpace) << three.status().ToString();
  // The same value pinned twice is charged once.
  Result<PinnedValue> again = c->Pin("b1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  // Another connection has a budget of its own.
  auto other = Connect();
  Result<PinnedValue> elsewhere = other->Pin("b3");
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status().ToString();
  ASSERT_TRUE(c->Unpin(*one).ok());
  ASSERT_TRUE(c->Unpin(*again).ok());
  Result<PinnedValue> now = c->Pin("b3");
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(Bytes(*now), Filled('3'));
}

TEST_F(PinTest, OneConnectionCannotUnpinAnothersPin) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(a->Upsert("mine", Filled('m')).ok());
  ASSERT_TRUE(a->Upsert("theirs", Filled('t')).ok());
  Result<PinnedValue> held = a->Pin("mine");
  Result<PinnedValue> own = b->Pin("theirs");
  ASSERT_TRUE(held.ok() && own.ok());
  PinnedValue forged = *own;  // b's connection, a's pin id
  forged.pin_id = held->pin_id;
  ASSERT_TRUE(b->Unpin(forged).ok());  // posted; the manager refuses it
  ASSERT_TRUE(a->Remove("mine").ok());
  Churn(*b);
  EXPECT_EQ(Bytes(*held), Filled('m'));
}

TEST_F(PinTest, PinsEndWithTheirConnection) {
  // Ten connections each pin a removed 1 MiB value and go away: were their
  // pins kept, the 8 MiB pool would fill with values nobody can reach.
  PinnedValue last;
  for (int i = 0; i < 10; ++i) {
    auto c = Connect();
    const std::string key = "gone" + std::to_string(i);
    ASSERT_TRUE(c->Upsert(key, Filled('g')).ok()) << "round " << i;
    Result<PinnedValue> p = c->Pin(key);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE(c->Remove(key).ok());
    last = *p;
    EXPECT_TRUE(c->PinHeld(last));
  }
  // The client is gone, its mapping is not: reading never faults.
  EXPECT_EQ(last.size, kMiB);
  EXPECT_EQ(last.data[0], 'g');
  Churn(*Connect());
}

TEST_F(PinTest, MissesAndTcpAreClearErrors) {
  auto c = Connect();
  Result<PinnedValue> miss = c->Pin("never-stored");
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), Code::kNotFound);
  auto tcp = Connect(/*unix_socket=*/false);
  ASSERT_TRUE(tcp->Upsert("over-tcp", Filled('x', 100)).ok());
  Result<PinnedValue> v = tcp->Pin("over-tcp");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kNotSupported);
  EXPECT_EQ(*tcp->Get("over-tcp"), Filled('x', 100));  // the connection still serves
}

}  // namespace
}  // namespace tierkv
