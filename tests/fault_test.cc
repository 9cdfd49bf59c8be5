// Fault injection with real processes: clients killed with SIGKILL in the
// middle of puts and gets, a client that never reads its replies, every object
// leased, injected allocation failures, and an SSD file made read-only
// (immutable) while the manager runs and before it starts. In every case the
// manager keeps serving the other clients, answers clear errors, and leaks
// nothing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "manager_process.h"
#include "raw_conn.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using proto::Opcode;
using testing::ManagerProcess;
using testing::RawConn;
using testing::RawReply;
constexpr size_t kMiB = 1 << 20;

int64_t DramUsed(const ManagerProcess& m) {
  return testing::ScrapeMetric(m, "memcache_allocated_bytes{medium=\"dram\"}");
}

std::string Pattern(int i, size_t size) {
  return std::string(size, static_cast<char>('a' + i % 26));
}

TEST(Fault, ClientsKilledMidPutAndMidGetLeakNothing) {
  ManagerProcess m({"--dram-size", "256MiB", "--lease-ms", "500", "--max-object-bytes", "256MiB"});
  auto watcher = Client::Connect(m.uds());
  ASSERT_TRUE(watcher.ok());
  ASSERT_TRUE((*watcher)->Put("shared", Pattern(0, 4 * kMiB)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, good{0};
  // A bystander keeps writing and verifying its own objects throughout.
  std::thread bystander([&] {
    auto c = Client::Connect(m.uds());
    if (!c.ok()) return ++bad, void();
    for (int i = 0; !stop; ++i) {
      const std::string key = "by" + std::to_string(i % 8);
      if (!(*c)->Upsert(key, Pattern(i, kMiB)).ok()) ++bad;
      auto v = (*c)->Get(key);
      if (!v.ok() || *v != Pattern(i, kMiB)) ++bad;
      ++good;
    }
  });
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // a client that puts and gets 4 MiB objects until killed
      auto c = Client::Connect(m.uds());
      if (!c.ok()) _exit(1);
      std::vector<char> buf(4 * kMiB);
      for (int i = 0;; ++i) {
        (void)(*c)->Upsert("victim" + std::to_string(i % 4), Pattern(i, 4 * kMiB));
        (void)(*c)->Get("shared", buf.data(), buf.size());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 150));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
  }
  stop = true;
  bystander.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(good.load(), 0);
  // Nothing stuck: a killed client's grants, leases and quarantined ranges go
  // with its connection, not with the lease TTL, so everything can be removed
  // at once and the pool goes back to empty.
  ASSERT_TRUE((*watcher)->RemoveAll(kDefaultTenant, /*force=*/true).ok());
  EXPECT_TRUE(testing::WaitFor([&] { return DramUsed(m) == 0; })) << DramUsed(m);
  EXPECT_TRUE((*watcher)->Put("after", Pattern(1, 200 * kMiB)).ok());
}

TEST(Fault, ClientThatNeverReadsItsRepliesHurtsOnlyItself) {
  ManagerProcess m({"--dram-size", "64MiB"});
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Put("big", Pattern(2, 4 * kMiB)).ok());
  const uint64_t rss_before = testing::ProcessRssBytes(m.pid());
  // Over TCP a get answers with the bytes inline: 200 gets of 4 MiB would be
  // 800 MiB of replies if the manager buffered them for a client that never reads.
  RawConn slow(m.tcp());
  const std::string key = testing::KeyBody("default", "big");
  std::thread flood([&] {
    for (uint64_t id = 1; id <= 200; ++id) {
      std::string frame;
      proto::FrameHeader h;
      h.opcode = static_cast<uint16_t>(Opcode::kGet);
      h.request_id = id;
      h.body_len = static_cast<uint32_t>(key.size());
      uint8_t hdr[proto::kHeaderSize];
      proto::EncodeHeader(h, hdr);
      frame.append(reinterpret_cast<char*>(hdr), sizeof(hdr));
      frame += key;
      if (!proto::WriteFull(slow.fd(), frame.data(), frame.size(), 5000).ok()) return;
    }
  });
  // The flood is in flight once the replies the client never reads pile up in
  // its socket: the manager is then blocked writing the rest.
  auto unread = [&] {
    int n = 0;
    return ioctl(slow.fd(), FIONREAD, &n) == 0 ? n : 0;
  };
  EXPECT_TRUE(testing::WaitFor([&] { return unread() >= 64 * 1024; }));
  // Everyone else is served meanwhile.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*c)->Put("k" + std::to_string(i), Pattern(i, 64 * 1024)).ok());
    auto v = (*c)->Get("k" + std::to_string(i));
    ASSERT_TRUE(v.ok() && *v == Pattern(i, 64 * 1024));
  }
  EXPECT_LT(testing::ProcessRssBytes(m.pid()), rss_before + 64 * kMiB);  // nothing piles up
  // ... while the flood was still stuck on its first replies.
  EXPECT_GE(unread(), 64 * 1024);
  shutdown(slow.fd(), SHUT_RDWR);
  flood.join();
  EXPECT_TRUE((*c)->Get("big").ok());
}

TEST(Fault, EveryObjectLeasedMeansNoSpaceUntilTheLeasesEnd) {
  // No background eviction: it could take the third object between its put and
  // its lease (it is the only unleased one above the high watermark). The
  // leases last 3 s: the puts and gets below must all fall inside them, also
  // in a ThreadSanitizer build on a loaded host.
  ManagerProcess m({"--dram-size", "16MiB", "--lease-ms", "3000", "--evict-high-watermark", "1",
                    "--evict-low-watermark", "1"});
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok());
  RawConn holder(m.uds());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*c)->Put("l" + std::to_string(i), Pattern(i, 5 * kMiB)).ok());
    RawReply r = holder.Call(Opcode::kLease, testing::KeyBody("default", "l" + std::to_string(i)),
                             static_cast<uint64_t>(i + 1));
    ASSERT_EQ(r.code(), Code::kOk);
  }
  Status st = (*c)->Put("more", Pattern(9, 5 * kMiB));
  EXPECT_EQ(st.code(), Code::kNoSpace) << st.ToString();
  EXPECT_EQ((*c)->Put("huge", Pattern(9, 17 * kMiB)).code(), Code::kNoSpace);  // > the pool
  for (int i = 0; i < 3; ++i) {                                                // still intact
    auto v = (*c)->Get("l" + std::to_string(i));
    ASSERT_TRUE(v.ok() && *v == Pattern(i, 5 * kMiB)) << i;
  }
  // The holder never releases; its leases end with their TTL and space comes back.
  EXPECT_TRUE(testing::WaitFor([&] { return (*c)->Put("more", Pattern(9, 5 * kMiB)).ok(); }));
}

TEST(Fault, InjectedAllocationFailuresAnswerNoSpaceAndNothingElse) {
  ManagerProcess m({"--dram-size", "32MiB", "--inject-alloc-failures", "1"});
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 20; ++i) {
    Status st = (*c)->Put("k" + std::to_string(i), Pattern(i, 100000));
    EXPECT_EQ(st.code(), Code::kNoSpace) << st.ToString();
  }
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) keys.push_back("b" + std::to_string(i));
  std::vector<PutItem> items;
  const std::string v(4096, 'b');
  for (const std::string& k : keys) items.push_back(PutItem{k, v.data(), v.size(), {}});
  for (const Status& st : (*c)->BatchPut(items)) EXPECT_EQ(st.code(), Code::kNoSpace);
  EXPECT_GE(testing::ScrapeMetric(m, "memcache_alloc_failures_total"), 20);
  EXPECT_TRUE((*c)->Exist("k0").code() == Code::kNotFound);
  EXPECT_EQ(m.Stop(SIGTERM), 0);  // alive and clean to the end
}

TEST(Fault, SometimesFailingAllocationsNeverCorruptWhatIsStored) {
  ManagerProcess m({"--dram-size", "32MiB", "--inject-alloc-failures", "3"});
  auto c = Client::Connect(m.uds());
  ASSERT_TRUE(c.ok());
  std::vector<int> stored;
  for (int i = 0; i < 60; ++i) {
    Status st = (*c)->Put("k" + std::to_string(i), Pattern(i, 300000));
    ASSERT_TRUE(st.ok() || st.code() == Code::kNoSpace) << st.ToString();
    if (st.ok()) stored.push_back(i);
  }
  EXPECT_FALSE(stored.empty());
  for (int i : stored) {  // every survivor (some were evicted) reads back intact
    auto v = (*c)->Get("k" + std::to_string(i));
    if (v.ok()) {
      EXPECT_TRUE(*v == Pattern(i, 300000)) << i;
    }
  }
}

// chattr +i makes a file immutable even for root: opening it for writing fails
// and writes through an already open descriptor fail with EPERM.
class Immutable {
 public:
  explicit Immutable(std::string path) : path_(std::move(path)) {
    ok_ = std::system(("chattr +i '" + path_ + "' 2>/dev/null").c_str()) == 0;
  }
  ~Immutable() { Undo(); }
  void Undo() {
    if (ok_) std::system(("chattr -i '" + path_ + "' 2>/dev/null").c_str());
    ok_ = false;
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool ok_ = false;
};

TEST(Fault, ReadOnlySsdFileKeepsDramServingAndSsdReadable) {
  char tmpl[] = "/tmp/tierkv-fault-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::vector<std::string> args = {"--dram-size", "16MiB",      "--ssd-dir",
                                         dir + "/ssd",  "--ssd-size", "64MiB"};
  {
    ManagerProcess m(args);
    auto c = Client::Connect(m.uds());
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE((*c)->Put("a" + std::to_string(i), Pattern(i, kMiB)).ok());
    // Some of them have been demoted, and one such flush is done before the
    // file turns read-only (a flush still in flight then would fail and drop
    // its object). Which ones the policy demotes first is its business.
    int kept = -1;  // the index of an object on SSD
    const bool demoted = testing::WaitFor(
        [&] {
          for (int i = 0; i < 20 && kept < 0; ++i) {
            Result<ObjectInfo> info = (*c)->Query("a" + std::to_string(i));
            if (info.ok() && (info->media & MediumBit(Medium::kSsd)) != 0) kept = i;
          }
          return kept >= 0;
        },
        30000);
    ASSERT_TRUE(demoted) << "nothing reached SSD: demoted "
                         << testing::ScrapeMetric(m, "tierkv_ssd_demoted_total")
                         << ", flushes failed "
                         << testing::ScrapeMetric(m, "tierkv_ssd_flush_failed_total")
                         << ", SSD I/O errors "
                         << testing::ScrapeMetric(m, "tierkv_ssd_io_errors_total");
    const std::string on_ssd = "a" + std::to_string(kept);
    Immutable ro(dir + "/ssd/tierkv-ssd.dat");
    if (!ro.ok()) std::filesystem::remove_all(dir);
    ASSERT_TRUE(ro.ok()) << "chattr +i (e2fsprogs) failed on " << dir;
    // New demotions fail; puts go on (their victims are dropped), old SSD
    // objects still read back, errors are counted.
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE((*c)->Put("b" + std::to_string(i), Pattern(i, kMiB)).ok()) << i;
    }
    EXPECT_GT(testing::ScrapeMetric(m, "tierkv_ssd_io_errors_total"), 0);
    EXPECT_GT(testing::ScrapeMetric(m, "tierkv_ssd_flush_failed_total"), 0);
    auto v = (*c)->Get(on_ssd);
    ASSERT_TRUE(v.ok()) << on_ssd << ": " << v.status().ToString();
    EXPECT_TRUE(*v == Pattern(kept, kMiB));
    EXPECT_TRUE((*c)->Get("b19").ok());
    ro.Undo();
    EXPECT_EQ(m.Stop(SIGTERM), 0);
  }
  {
    Immutable ro(dir + "/ssd/tierkv-ssd.dat");
    ASSERT_TRUE(ro.ok());
    ManagerProcess m(args);  // cannot open the file for writing: DRAM only
    EXPECT_NE(m.startup_output().find("SSD tier unavailable"), std::string::npos)
        << m.startup_output();
    auto c = Client::Connect(m.uds());
    ASSERT_TRUE((*c)->Put("k", "v").ok());
    EXPECT_EQ(*(*c)->Get("k"), "v");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tierkv
