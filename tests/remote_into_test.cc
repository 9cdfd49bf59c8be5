// Remote gets into registered memory (Client::RegisterBuffer) with real etcd
// and real managers: the data channel reads values of every size straight
// into the client's memory (single, batch, scatter/gather, every byte
// compared) and the requester keeps no copy; the owner killed in the middle
// of the READs; checksum failures injected on the owner's data channel.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <future>

#include "cluster_util.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::ScrapeMetric;
using testing::WaitFor;

void PutAll(const ManagerProcess& m, const std::vector<std::pair<std::string, size_t>>& objs) {
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const auto& [key, size] : objs) {
    ASSERT_TRUE((*c)->Put(key, PatternValue(key, size)).ok()) << key;
  }
}

bool SeesAll(const ManagerProcess& m, int64_t n) {
  return WaitFor(
      [&] {
        Json j = GetJson(m, "/cache/metadata");
        return j.is_object() && j["index"]["entries"].get<int64_t>() == n;
      },
      20000);
}

bool Holds(const uint8_t* at, const std::string& key, size_t size) {
  return std::memcmp(at, PatternValue(key, size).data(), size) == 0;
}

TEST(RemoteInto, ValuesOfEverySizeAreReadStraightIntoRegisteredMemory) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--dram-size", "256MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--dram-size", "256MiB"});
  const std::vector<std::pair<std::string, size_t>> objs = {
      {"tiny", 1}, {"page", 4096}, {"odd", 100003}, {"mib", 1u << 20}, {"big", 20u << 20}};
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, static_cast<int64_t>(objs.size())));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  Result<RegisteredBuffer> buf = (*c)->RegisterBuffer(48u << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  const auto into = [&] { return ScrapeMetric(*b.proc, "tierkv_remote_read_into_objects_total"); };

  // One at a time, at an offset that is not page-aligned.
  int64_t reads = 0;
  for (const auto& [key, size] : objs) {
    std::memset(buf->data, 0, size + 100);
    Result<size_t> got = (*c)->Get(key, buf->data + 99, buf->size - 99);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, size);
    EXPECT_TRUE(Holds(buf->data + 99, key, size)) << key;
    EXPECT_EQ(into(), ++reads);
  }
  // Nothing was stored here: every get went to the owner.
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), 0);
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_registered_gets_total{where=\"remote\"}"), reads);
  EXPECT_EQ((*c)->Exist("mib", kDefaultTenant, {true}).code(), Code::kNotFound);

  // A batch, each value at its own place, beside an item in plain memory
  // (read the usual way, and kept here as a copy) and one that does not fit.
  std::vector<std::string> keys;
  std::vector<GetItem> items;
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  for (const auto& [key, size] : objs) keys.push_back(key);
  for (size_t i = 0; i < objs.size(); ++i) {
    offsets.push_back(off);
    items.push_back({keys[i], buf->data + off, objs[i].second, true});
    off += objs[i].second + 13;
  }
  std::string plain(4096, '\0');
  items.push_back({"page", plain.data(), plain.size(), true});
  items.push_back({"odd", buf->data + off, 1000, false});
  std::memset(buf->data, 0, buf->size);
  std::vector<Result<size_t>> got = (*c)->BatchGet(items);
  for (size_t i = 0; i < objs.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status().ToString();
    EXPECT_TRUE(Holds(buf->data + offsets[i], keys[i], objs[i].second)) << keys[i];
  }
  ASSERT_TRUE(got[objs.size()].ok());
  EXPECT_TRUE(plain == PatternValue("page", 4096));
  EXPECT_EQ(got[objs.size() + 1].status().code(), Code::kTooLarge);
  EXPECT_EQ(into(), reads + static_cast<int64_t>(objs.size()));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), 1);
  reads = into();

  // Scatter/gather: the 20 MiB value (read in ranges) over three pieces of
  // two buffers, and the 1 MiB one over two.
  Result<RegisteredBuffer> other = (*c)->RegisterBuffer(8u << 20);
  ASSERT_TRUE(other.ok());
  const size_t big = 20u << 20;
  const Region big_parts[] = {{buf->data + 1, 5000},
                              {other->data + 3, 7u << 20},
                              {buf->data + (24u << 20), big - 5000 - (7u << 20)}};
  const Region mib_parts[] = {{other->data + (7u << 20) + 64, 4096},
                              {buf->data + (10u << 20), (1u << 20) - 4096}};
  const GetPartsItem sg[] = {{"big", big_parts}, {"mib", mib_parts}};
  std::vector<Result<size_t>> sg_got = (*c)->BatchGetParts(sg);
  for (const GetPartsItem& it : sg) {
    std::string joined;
    for (const Region& p : it.parts) joined.append(static_cast<const char*>(p.data), p.size);
    const size_t i = &it - sg;
    ASSERT_TRUE(sg_got[i].ok()) << sg_got[i].status().ToString();
    EXPECT_TRUE(joined == PatternValue(std::string(it.key), joined.size())) << it.key;
  }
  EXPECT_EQ(into(), reads + 2);
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_read_checksum_failures_total"), 0);
  EXPECT_TRUE(WaitFor([&] { return ScrapeMetric(*a.proc, "tierkv_grants_live") == 0; }));
}

TEST(RemoteInto, AnOwnerKilledMidReadLeavesNoValueReportedAsRead) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", {"--dram-size", "600MiB"});
  Node b = StartNode(etcd.endpoints(), cluster, "b",
                     {"--dram-size", "64MiB", "--data-connections", "1"});
  const int n = 256;
  std::vector<std::pair<std::string, size_t>> objs;
  for (int i = 0; i < n; ++i) objs.emplace_back("m" + std::to_string(i), 1u << 20);
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, n));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  Result<RegisteredBuffer> buf = (*c)->RegisterBuffer(static_cast<size_t>(n) << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  std::memset(buf->data, 0, buf->size);
  std::vector<GetItem> items;
  for (int i = 0; i < n; ++i) {
    items.push_back({objs[i].first, buf->data + (static_cast<size_t>(i) << 20), 1u << 20, true});
  }
  const auto start = std::chrono::steady_clock::now();
  auto batch = std::async(std::launch::async, [&] { return (*c)->BatchGet(items); });
  ASSERT_TRUE(WaitFor(
      [&] { return ScrapeMetric(*b.proc, "tierkv_remote_read_into_objects_total") > 0; }, 20000));
  ASSERT_EQ(::kill(a.proc->pid(), SIGKILL), 0);
  std::vector<Result<size_t>> got = batch.get();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0);  // bounded by the data channel's deadline
  size_t ok = 0;
  for (int i = 0; i < n; ++i) {
    if (got[i].ok()) {
      ++ok;
      EXPECT_TRUE(Holds(buf->data + (static_cast<size_t>(i) << 20), objs[i].first, 1u << 20))
          << objs[i].first;  // reported as read: the whole value is there
    } else {
      EXPECT_EQ(got[i].status().code(), Code::kNotFound) << got[i].status().ToString();
      EXPECT_FALSE(got[i].status().message().empty());
    }
  }
  EXPECT_GT(ok, 0u);
  EXPECT_LT(ok, got.size());
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_read_into_objects_total"),
            static_cast<int64_t>(ok));
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), 0);
  EXPECT_TRUE(
      WaitFor([&] { return ScrapeMetric(*b.proc, "tierkv_remote_grants_awaiting_release") == 0; }));
  EXPECT_TRUE(LocalRoundTrip(*b.proc, "still-serving").ok());
  // The client's registration still works for local values.
  ASSERT_TRUE((*c)->Put("local", std::string(5000, 'l')).ok());
  ASSERT_TRUE((*c)->Get("local", buf->data, 5000).ok());
  EXPECT_EQ(buf->data[4999], 'l');
}

TEST(RemoteInto, ChecksumFailuresOnTheDataChannelMissCleanlyAndAreCounted) {
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  // Every READ the owner answers carries a wrong checksum.
  Node a = StartNode(etcd.endpoints(), cluster, "a",
                     {"--dram-size", "128MiB", "--inject-read-checksum-failures", "1"});
  Node b = StartNode(etcd.endpoints(), cluster, "b", {"--dram-size", "128MiB"});
  const std::vector<std::pair<std::string, size_t>> objs = {{"small", 4096}, {"large", 20u << 20}};
  PutAll(*a.proc, objs);
  ASSERT_TRUE(SeesAll(*b.proc, 2));
  auto c = Client::Connect(b.proc->uds());
  ASSERT_TRUE(c.ok());
  Result<RegisteredBuffer> buf = (*c)->RegisterBuffer(24u << 20);
  ASSERT_TRUE(buf.ok());
  for (const auto& [key, size] : objs) {
    Result<size_t> got = (*c)->Get(key, buf->data, buf->size);
    ASSERT_FALSE(got.ok()) << key;
    EXPECT_EQ(got.status().code(), Code::kNotFound);
    EXPECT_NE(got.status().message().find("checksum mismatch"), std::string::npos)
        << got.status().ToString();
  }
  EXPECT_GE(ScrapeMetric(*b.proc, "tierkv_remote_read_checksum_failures_total"), 2);
  EXPECT_GE(ScrapeMetric(*b.proc, "tierkv_remote_fetch_misses_total{reason=\"read_failed\"}"), 2);
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_read_into_objects_total"), 0);
  // A plain get fails the same way and stores nothing.
  std::string plain(4096, '\0');
  EXPECT_EQ((*c)->Get("small", plain.data(), plain.size()).status().code(), Code::kNotFound);
  EXPECT_EQ(ScrapeMetric(*b.proc, "tierkv_remote_fetched_objects_total"), 0);
  EXPECT_EQ((*c)->Exist("small", kDefaultTenant, {true}).code(), Code::kNotFound);
  // The owner's own copy is intact, and both managers serve on.
  auto on_a = Client::Connect(a.proc->uds());
  ASSERT_TRUE(on_a.ok());
  Result<std::string> back = (*on_a)->Get("large");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == PatternValue("large", 20u << 20));
  EXPECT_TRUE(LocalRoundTrip(*b.proc, "still-serving").ok());
}

}  // namespace
}  // namespace tierkv
