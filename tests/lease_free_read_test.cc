// Gets without a read lease (ClientOptions::lease_free_reads, LOCATE and
// BATCH_LOCATE) against a real manager: the values, the generation table the
// copies are checked against, and a copy whose range is freed meanwhile.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/client_test_peer.h"
#include "client_util.h"
#include "manager_process.h"
#include "raw_conn.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;
using testing::RandomBytes;
using testing::RawConn;
using testing::RawReply;

std::unique_ptr<Client> Connect(const std::string& address, bool lease_free = true) {
  ClientOptions o;
  o.lease_free_reads = lease_free;
  return testing::ConnectWith(address, o);
}

TEST(LeaseFreeReads, GetsReturnTheValuesAndHoldNoLeaseWhileCopying) {
  ManagerProcess m({"--dram-size", "256MiB"});
  auto writer = Connect(m.uds());
  auto reader = Connect(m.uds());
  auto observer = Connect(m.uds());
  ASSERT_TRUE(writer && reader && observer);
  const size_t sizes[] = {1, 4096, 65536, 1 << 20};
  std::vector<std::string> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_TRUE(writer->Put(keys.back(), RandomBytes(sizes[i], i)).ok());
  }
  // While each copy runs, the object holds no lease.
  std::vector<uint32_t> leases_seen;
  ClientTestPeer::SetAfterLocatedCopy(*reader, [&] {
    for (const auto& k : keys) {
      auto info = observer->Query(k);
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      leases_seen.push_back(info->active_leases);
    }
  });
  for (int i = 0; i < 4; ++i) {
    auto v = reader->Get(keys[i]);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(*v == RandomBytes(sizes[i], i));
  }
  const std::vector<std::string_view> views(keys.begin(), keys.end());
  auto batch = reader->BatchGet(views);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(batch[i].ok()) << batch[i].status().ToString();
    EXPECT_TRUE(*batch[i] == RandomBytes(sizes[i], i));
  }
  EXPECT_EQ(leases_seen.size(), 5 * keys.size());  // four gets and one batch
  for (uint32_t n : leases_seen) EXPECT_EQ(n, 0u);

  // With the option off, gets take leases as before: no lease-free copy.
  auto leasing = Connect(m.uds(), /*lease_free=*/false);
  bool located = false;
  ClientTestPeer::SetAfterLocatedCopy(*leasing, [&] { located = true; });
  auto v = leasing->Get(keys[3]);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(*v == RandomBytes(sizes[3], 3));
  EXPECT_EQ(leasing->BatchGet(views).size(), 4u);
  EXPECT_FALSE(located);
}

// The hook replaces or removes a key between the copy and its check: the copy
// came from a range that was freed, so the get reads again under a lease and
// returns what is stored now, never the copied bytes.
TEST(LeaseFreeReads, ACopyWhoseRangeWasFreedMeanwhileIsReadAgainUnderALease) {
  ManagerProcess m({"--dram-size", "256MiB"});
  auto writer = Connect(m.uds());
  auto reader = Connect(m.uds());
  ASSERT_TRUE(writer && reader);
  const size_t size = 64 << 10;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(writer->Put("b" + std::to_string(i), RandomBytes(size, i)).ok());
  }
  int calls = 0;
  ClientTestPeer::SetAfterLocatedCopy(*reader, [&] {
    if (calls++ == 0) {
      ASSERT_TRUE(writer->Upsert("b1", RandomBytes(size, 100)).ok());
    }
  });
  auto v = reader->Get("b1");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(*v == RandomBytes(size, 100));
  EXPECT_EQ(calls, 1);  // the second read was under a lease

  calls = 0;
  ClientTestPeer::SetAfterLocatedCopy(*reader, [&] {
    if (calls++ == 0) {
      ASSERT_TRUE(writer->Upsert("b1", RandomBytes(size, 101)).ok());
    }
  });
  const std::vector<std::string_view> keys = {"b0", "b1", "b2"};
  std::vector<std::string> bufs(3, std::string(size, '\0'));
  std::vector<GetItem> items;
  for (int i = 0; i < 3; ++i) items.push_back({keys[i], bufs[i].data(), size});
  auto got = reader->BatchGet(items);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(*got[i], size);
  }
  EXPECT_TRUE(bufs[0] == RandomBytes(size, 0));
  EXPECT_TRUE(bufs[1] == RandomBytes(size, 101));
  EXPECT_TRUE(bufs[2] == RandomBytes(size, 2));
  EXPECT_EQ(calls, 1);

  calls = 0;
  ClientTestPeer::SetAfterLocatedCopy(*reader, [&] {
    if (calls++ == 0) {
      ASSERT_TRUE(writer->Remove("b2").ok());
    }
  });
  EXPECT_EQ(reader->Get("b2").status().code(), Code::kNotFound);
}

// What the client relies on, seen on the wire: the HELLO flag brings the
// table (read-only), a LOCATE answers the value's place without a lease and
// the generation the table then holds, and freeing the value advances it.
TEST(LeaseFreeReads, TheManagerAdvancesARangesGenerationWhenItIsFreed) {
  ManagerProcess m({"--dram-size", "64MiB"});
  auto writer = Connect(m.uds());
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->Put("g", RandomBytes(10000, 7)).ok());
  RawConn raw(m.uds(), /*hello=*/false);
  RawReply hello = raw.Hello(0, proto::kHelloGenerations);
  ASSERT_EQ(hello.code(), Code::kOk) << hello.message();
  proto::HelloReply rep;
  proto::Reader hr(hello.body);
  ASSERT_TRUE(rep.Decode(hr).ok());
  ASSERT_TRUE(rep.has_generations_fields);
  EXPECT_EQ(rep.generations, 1);
  ASSERT_EQ(rep.generation_page_bytes, 4096u);
  ASSERT_GE(raw.pool_fd(), 0);
  ASSERT_GE(raw.generations_fd(), 0);
  const uint64_t table_bytes = rep.pool_size / rep.generation_page_bytes * 4;
  void* table = mmap(nullptr, table_bytes, PROT_READ, MAP_SHARED, raw.generations_fd(), 0);
  ASSERT_NE(table, MAP_FAILED);
  const auto* gens = static_cast<const uint32_t*>(table);
  // A client can neither write the table nor resize the pool under the manager.
  EXPECT_EQ(mmap(nullptr, table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, raw.generations_fd(), 0),
            MAP_FAILED);
  EXPECT_NE(ftruncate(raw.pool_fd(), 0), 0);

  std::string body;
  proto::Writer w(&body);
  proto::BatchKeysRequest req;
  req.tenant = kDefaultTenant;
  req.keys = {"g", "absent"};
  req.Encode(w);
  RawReply located = raw.Call(proto::Opcode::kBatchLocate, body);
  ASSERT_EQ(located.code(), Code::kOk) << located.message();
  proto::Reader r(located.body);
  ASSERT_EQ(r.U32(), 2u);
  ASSERT_TRUE(r.ItemStatus().ok());
  const proto::LeaseReply l = proto::DecodeLocateReply(r);
  EXPECT_EQ(r.ItemStatus().code(), Code::kNotFound);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(l.lease_id, 0u);
  EXPECT_EQ(l.deadline_nanos, 0);
  EXPECT_EQ(l.size, 10000u);
  EXPECT_EQ(gens[l.offset / 4096], l.generation);
  auto info = writer->Query("g");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->active_leases, 0u);

  RawReply one = raw.Call(proto::Opcode::kLocate, testing::KeyBody(kDefaultTenant, "g"));
  ASSERT_EQ(one.code(), Code::kOk) << one.message();
  proto::Reader r1(one.body);
  const proto::LeaseReply l1 = proto::DecodeLocateReply(r1);
  EXPECT_TRUE(r1.done());
  EXPECT_EQ(l1.offset, l.offset);
  EXPECT_EQ(l1.generation, l.generation);

  ASSERT_TRUE(writer->Remove("g").ok());
  EXPECT_NE(gens[l.offset / 4096], l.generation);
  munmap(table, table_bytes);
}

// A value whose every 8-byte word is `stamp`.
std::string Stamped(size_t n, uint64_t stamp) {
  std::string v(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) std::memcpy(v.data() + i, &stamp, 8);
  return v;
}

// The first word whose value differs from the first, or npos.
size_t FirstMixedWord(const std::string& v) {
  for (size_t i = 8; i + 8 <= v.size(); i += 8) {
    if (std::memcmp(v.data(), v.data() + i, 8) != 0) return i;
  }
  return std::string::npos;
}

// Writers replace a few 1 MiB values over and over (their ranges are freed and
// handed out again all the time) while readers get them without leases: every
// value read is one that was written whole, never a mix of two.
TEST(LeaseFreeReads, ValuesReplacedDuringGetsAreNeverReturnedTorn) {
  ManagerProcess m({"--dram-size", "32MiB"});
  constexpr size_t kSize = 1 << 20;
  constexpr int kKeys = 4, kWrites = 600, kReads = 600;
  {
    auto c = Connect(m.uds());
    ASSERT_TRUE(c);
    for (int k = 0; k < kKeys; ++k) {
      ASSERT_TRUE(c->Put("s" + std::to_string(k), Stamped(kSize, k)).ok());
    }
  }
  std::atomic<int> torn{0}, wrong_key{0}, failed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      auto c = Connect(m.uds());
      if (!c) return failed.fetch_add(1), void();
      for (int i = 0; i < kWrites; ++i) {
        const int k = 2 * (i % (kKeys / 2)) + w;  // each writer its own keys
        // The stamp names the key in its low byte, and the write.
        const uint64_t stamp = (uint64_t{1} << 32) * (w * kWrites + i + 1) + k;
        const Status st = c->Upsert("s" + std::to_string(k), Stamped(kSize, stamp));
        if (!st.ok()) ADD_FAILURE() << "upsert: " << st.ToString();
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = Connect(m.uds());
      if (!c) return failed.fetch_add(1), void();
      std::vector<std::string> bufs(kKeys, std::string(kSize, '\0'));
      for (int i = 0; i < kReads; ++i) {
        const int k = (i + r) % kKeys;
        std::vector<std::string> values;
        if (i % 2 == 0) {
          auto v = c->Get("s" + std::to_string(k));
          if (!v.ok()) {
            ADD_FAILURE() << "get: " << v.status().ToString();
            continue;
          }
          values.push_back(std::move(*v));
        } else {
          std::vector<std::string> names;
          for (int j = 0; j < kKeys; ++j) names.push_back("s" + std::to_string(j));
          std::vector<GetItem> items;
          for (int j = 0; j < kKeys; ++j) items.push_back({names[j], bufs[j].data(), kSize});
          for (const auto& got : c->BatchGet(items)) {
            if (!got.ok()) ADD_FAILURE() << "batch get: " << got.status().ToString();
          }
          values = bufs;
        }
        for (size_t j = 0; j < values.size(); ++j) {
          const int want = values.size() == 1 ? k : static_cast<int>(j);
          if (FirstMixedWord(values[j]) != std::string::npos) torn.fetch_add(1);
          if (static_cast<uint8_t>(values[j][0]) != want) wrong_key.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(wrong_key.load(), 0);
}

TEST(LeaseFreeReads, HelloFlagsAreCheckedAndLocatingNeedsTheUnixSocket) {
  ManagerProcess m;
  RawConn raw(m.uds(), /*hello=*/false);
  RawReply bad = raw.Hello(0, 0x80);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("unknown hello flag bits"), std::string::npos) << bad.message();
  // The handshake is not complete, and the connection still takes a HELLO.
  RawReply plain = raw.Hello();
  ASSERT_EQ(plain.code(), Code::kOk);
  proto::HelloReply rep;
  proto::Reader pr(plain.body);
  ASSERT_TRUE(rep.Decode(pr).ok());
  EXPECT_FALSE(rep.has_generations_fields);  // not asked for: the reply as before
  EXPECT_EQ(raw.generations_fd(), -1);

  RawConn tcp(m.tcp(), /*hello=*/false);
  RawReply th = tcp.Hello(0, proto::kHelloGenerations);
  ASSERT_EQ(th.code(), Code::kOk);
  proto::Reader tr(th.body);
  ASSERT_TRUE(rep.Decode(tr).ok());
  EXPECT_TRUE(rep.has_generations_fields);
  EXPECT_EQ(rep.generations, 0);  // no shared memory over TCP
  RawReply locate = tcp.Call(proto::Opcode::kLocate, testing::KeyBody(kDefaultTenant, "k"));
  EXPECT_EQ(locate.code(), Code::kNotSupported);
  EXPECT_NE(locate.message().find("locate"), std::string::npos) << locate.message();
  // A TCP client with the option on reads inline bytes as before.
  auto c = Connect(m.tcp());
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->Put("t", "inline").ok());
  auto v = c->Get("t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "inline");
}

}  // namespace
}  // namespace tierkv
