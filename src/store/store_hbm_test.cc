// The HBM tier inside the store, on host-memory stand-in devices: promotion
// by prefetch, memory announced as one medium, DRAM eviction that leaves a
// value in HBM, host gets of HBM-only values (one copy down however many
// wait), HBM eviction down to DRAM and on to SSD and back, watermarks, pins,
// snapshots, removal and upsert, and GPUs whose copies fail.
#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "device/host_device.h"
#include "media/mem_block_file.h"
#include "store/store_test_util.h"

namespace tierkv {
namespace {

std::string Key(int i) { return "k" + std::to_string(i); }
std::string Want(int i, size_t size) {  // what Put(Key(i), Fill(i), size) stored
  std::string fill = "value-" + std::to_string(i) + "-", want;
  while (want.size() < size) want += fill;
  want.resize(size);
  return want;
}

// Switches that make every device's copies in one direction fail.
struct CopyFaults {
  std::atomic<bool> to_host{false};
  std::atomic<bool> to_device{false};
};

// A device of the host-memory runtime whose copies fail when told to.
class FlakyDevice final : public Device {
 public:
  FlakyDevice(std::unique_ptr<Device> inner, std::shared_ptr<CopyFaults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}
  int ordinal() const override { return inner_->ordinal(); }
  std::string name() const override { return inner_->name(); }
  uint64_t total_bytes() const override { return inner_->total_bytes(); }
  Result<DevicePtr> Allocate(uint64_t bytes) override { return inner_->Allocate(bytes); }
  Status Free(DevicePtr ptr) override { return inner_->Free(ptr); }
  Status CopyToDevice(DevicePtr dst, const void* src, uint64_t n) override {
    if (faults_->to_device) return Status(Code::kIoError, "cuMemcpyHtoD: injected failure");
    return inner_->CopyToDevice(dst, src, n);
  }
  Status CopyToHost(void* dst, DevicePtr src, uint64_t n) override {
    if (faults_->to_host) return Status(Code::kIoError, "cuMemcpyDtoH: injected failure");
    return inner_->CopyToHost(dst, src, n);
  }
  Status CopyOnDevice(DevicePtr dst, DevicePtr src, uint64_t n) override {
    return inner_->CopyOnDevice(dst, src, n);
  }
  Result<IpcHandle> Export(DevicePtr base) override { return inner_->Export(base); }
  Result<DevicePtr> Import(const IpcHandle& handle) override { return inner_->Import(handle); }
  Status CloseImport(DevicePtr ptr) override { return inner_->CloseImport(ptr); }

 private:
  std::unique_ptr<Device> inner_;
  std::shared_ptr<CopyFaults> faults_;
};

class FlakyRuntime final : public DeviceRuntime {
 public:
  FlakyRuntime(std::unique_ptr<DeviceRuntime> inner, std::shared_ptr<CopyFaults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}
  int count() const override { return inner_->count(); }
  Result<std::unique_ptr<Device>> Open(int ordinal) override {
    auto d = inner_->Open(ordinal);
    if (!d.ok()) return d.status();
    return std::unique_ptr<Device>(std::make_unique<FlakyDevice>(std::move(*d), faults_));
  }

 private:
  std::unique_ptr<DeviceRuntime> inner_;
  std::shared_ptr<CopyFaults> faults_;
};

class HbmStoreTest : public StoreTest {
 protected:
  // A store over `dram` bytes with `gpus` stand-in GPUs of `hbm` bytes each,
  // and an SSD tier of `ssd` bytes when not 0.
  void MakeHbm(uint64_t dram, uint64_t hbm, int gpus = 1, uint64_t ssd = 0,
               StoreOptions opts = {}) {
    store_.reset();
    tier_.reset();
    HbmConfig c;
    for (int i = 0; i < gpus; ++i) c.devices.push_back(i);
    c.size = hbm;
    c.backend = "host";
    auto tier =
        HbmTier::Open(c, std::make_unique<FlakyRuntime>(
                             MakeHostMemoryDevices(std::vector<uint64_t>(gpus, hbm)), faults_));
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(*tier);
    opts.shards = 4;
    Make(dram, opts);
    if (ssd != 0) {
      auto file = std::make_unique<MemBlockFile>(std::make_shared<std::string>(ssd, '\0'));
      std::vector<SsdBlob> recovered;
      SsdRecoveryStats stats;
      auto ssd_tier = SsdTier::Open(std::move(file), &recovered, &stats);
      ASSERT_TRUE(ssd_tier.ok());
      ASSERT_TRUE(store_->AttachSsd(std::move(*ssd_tier), {}, stats).ok());
    }
    ASSERT_TRUE(store_->AttachHbm(tier_.get()).ok());
  }
  void SetUp() override { MakeHbm(16 * kMiB, 4 * kMiB); }
  void TearDown() override { store_.reset(); }  // before the pools its replicas point into

  Status PutI(int i, uint64_t size) {
    Status st = Put(Key(i), "value-" + std::to_string(i) + "-", size);
    clock_.AdvanceMillis(1);
    return st;
  }
  size_t Prefetch(std::vector<std::string> keys) {
    return store_->admin().Prefetch("default", keys);
  }
  size_t EvictOneTier(std::vector<std::string> keys) {
    return store_->admin().EvictKeys("default", keys);
  }
  uint32_t Media(std::string_view key) {
    auto q = store_->Query({}, {"default", key});
    return q.ok() ? q->media : 0;
  }
  HbmStats Hbm() { return store_->admin().Stats().hbm; }
  uint64_t HbmUsed() { return tier_->allocated(); }

  static constexpr uint32_t kHbm = MediumBit(Medium::kHbm);
  static constexpr uint32_t kDram = MediumBit(Medium::kDram);
  static constexpr uint32_t kSsd = MediumBit(Medium::kSsd);

  std::shared_ptr<CopyFaults> faults_ = std::make_shared<CopyFaults>();
  std::unique_ptr<HbmTier> tier_;  // outlives store_ (TearDown)
};

TEST_F(HbmStoreTest, AttachRefusesASecondTierAndNone) {
  EXPECT_EQ(store_->AttachHbm(tier_.get()).code(), Code::kInvalidArgument);
  auto pool = DramPool::Create(kMiB);
  ASSERT_TRUE(pool.ok());
  auto plain = Store::Create({}, std::move(*pool));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->AttachHbm(nullptr).code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->has_hbm());
  EXPECT_FALSE((*plain)->has_hbm());
}

TEST_F(HbmStoreTest, PrefetchCopiesUpAndMemoryIsAnnouncedOnce) {
  ASSERT_TRUE(PutI(1, 100000).ok());
  observer_.Take();
  EXPECT_EQ(Prefetch({Key(1), "absent"}), 1u);
  EXPECT_EQ(Media(Key(1)), kHbm | kDram);
  EXPECT_GE(HbmUsed(), 100000u);
  EXPECT_TRUE(observer_.Take().empty());  // memory was already announced
  EXPECT_EQ(Prefetch({Key(1)}), 0u);      // already at the top
  const HbmStats h = Hbm();
  EXPECT_TRUE(h.enabled);
  EXPECT_EQ(h.objects, 1u);
  EXPECT_EQ(h.promoted, 1u);
  EXPECT_EQ(h.promoted_bytes, 100000u);
  // The HBM bytes are the value's.
  std::string in_hbm(100000, '\0');
  ASSERT_TRUE(tier_->pools()[0]->Read(in_hbm.data(), 0, in_hbm.size()).ok());
  EXPECT_EQ(in_hbm, Want(1, 100000));
}

TEST_F(HbmStoreTest, DramEvictionLeavesTheValueInHbmAndAGetCopiesItDown) {
  ASSERT_TRUE(PutI(1, 200000).ok());
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  observer_.Take();
  EXPECT_EQ(store_->admin().EvictDownTo(0), 1u);  // DRAM only
  EXPECT_EQ(Media(Key(1)), kHbm);
  EXPECT_EQ(Used(), 0u);
  EXPECT_TRUE(observer_.Take().empty());  // still in memory
  EXPECT_EQ(store_->admin().Stats().objects, 1u);

  auto v = Get(Key(1));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, Want(1, 200000));
  EXPECT_EQ(Media(Key(1)), kHbm | kDram);  // the HBM replica stays
  const HbmStats h = Hbm();
  EXPECT_EQ(h.warmed, 1u);
  EXPECT_EQ(h.warmed_bytes, 200000u);
  EXPECT_EQ(h.get_hits, 1u);
  EXPECT_EQ(store_->admin().Stats().get_hits_dram, 0u);
  EXPECT_TRUE(observer_.Take().empty());
}

TEST_F(HbmStoreTest, ManyGetsOfAnHbmOnlyValueCopyItDownOnce) {
  ASSERT_TRUE(PutI(1, kMiB).ok());
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 1u);
  std::vector<std::thread> readers;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&] {
      auto l = store_->Lease({}, {"default", Key(1)});
      if (!l.ok()) return;
      good += std::string(reinterpret_cast<const char*>(l->data), l->size) == Want(1, kMiB);
      (void)store_->Release({}, l->lease_id);
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(good.load(), 8);
  EXPECT_EQ(Hbm().warmed, 1u);  // the others waited for that copy or found it in DRAM
  EXPECT_GE(Hbm().get_hits, 1u);
  EXPECT_EQ(Hbm().get_hits + store_->admin().Stats().get_hits_dram, 8u);
}

TEST_F(HbmStoreTest, BatchGetAndPinCopyHbmOnlyValuesDown) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PutI(i, 50000).ok());
  ASSERT_EQ(Prefetch({Key(0), Key(1), Key(2)}), 3u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 3u);
  std::vector<std::string_view> keys = {"k0", "k1", "absent"};
  auto leases = store_->BatchLease({}, "default", keys);
  ASSERT_TRUE(leases[0].ok() && leases[1].ok());
  EXPECT_EQ(leases[2].code(), Code::kNotFound);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(leases[i]->data), leases[i]->size),
              Want(i, 50000));
    EXPECT_TRUE(store_->Release({}, leases[i]->lease_id).ok());
  }
  // A pin that may not wait for the disk still copies from HBM.
  auto pin = store_->pins().Pin(7, {"default", Key(2)}, 0, 0, /*may_rewarm=*/false);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(pin->data), pin->size), Want(2, 50000));
  EXPECT_TRUE(store_->pins().Unpin(7, pin->pin_id).ok());
}

TEST_F(HbmStoreTest, EvictOneTierMovesHbmDownToDramThenToNothing) {
  ASSERT_TRUE(PutI(1, 300000).ok());
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  // HBM and DRAM: one tier down drops the HBM replica (DRAM holds it).
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), kDram);
  EXPECT_EQ(HbmUsed(), 0u);
  EXPECT_EQ(Hbm().dropped, 1u);
  // Only in HBM: one tier down copies it into DRAM.
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 1u);
  observer_.Take();
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), kDram);
  EXPECT_EQ(HbmUsed(), 0u);
  EXPECT_EQ(Hbm().demoted, 1u);
  EXPECT_EQ(Hbm().demoted_bytes, 300000u);
  EXPECT_TRUE(observer_.Take().empty());  // it never left memory
  EXPECT_EQ(*Get(Key(1)), Want(1, 300000));
  // Then out of DRAM (no SSD): gone, announced once.
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), 0u);
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"evicted default/k1 dram"});
}

TEST_F(HbmStoreTest, HbmDramSsdAndBack) {
  MakeHbm(2 * kMiB, 2 * kMiB, 1, 64 * kMiB);
  ASSERT_TRUE(PutI(1, kMiB).ok());
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  // DRAM victim: written to SSD, dropped from DRAM; HBM still holds it.
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);  // HBM -> dropped (DRAM has it)
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 1u);
  EXPECT_EQ(Media(Key(1)), kHbm | kSsd);
  // HBM victim: copied into DRAM; DRAM victim: dropped (SSD has it).
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), kDram | kSsd);
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), kSsd);
  // And back: a get rewarms from SSD, prefetch moves it up into HBM.
  EXPECT_EQ(*Get(Key(1)), Want(1, kMiB));
  EXPECT_EQ(Prefetch({Key(1)}), 1u);
  EXPECT_EQ(Media(Key(1)), kHbm | kDram | kSsd);
  // Prefetch of an SSD-only value rewarms it into DRAM (one tier up).
  ASSERT_EQ(EvictOneTier({Key(1)}), 1u);  // HBM dropped
  ASSERT_EQ(EvictOneTier({Key(1)}), 1u);  // DRAM dropped
  ASSERT_EQ(Media(Key(1)), kSsd);
  EXPECT_EQ(Prefetch({Key(1)}), 1u);
  store_->admin().WaitTierIdle();
  EXPECT_EQ(Media(Key(1)), kDram | kSsd);
  // Announced: memory as one medium (it left memory twice, each time from
  // DRAM: HBM never held it alone), SSD on its own.
  const std::vector<std::string> ev = observer_.Take();
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "stored default/k1 ssd"), 1);
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "demoted default/k1 dram"), 2);
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "stored default/k1 dram"), 3);  // put, 2 rewarms
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(),
                          [](const std::string& e) { return e.find("hbm") != std::string::npos; }),
            0);
}

TEST_F(HbmStoreTest, AFullPoolMakesRoomAndWatermarksBringItDown) {
  MakeHbm(32 * kMiB, 4 * kMiB);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(PutI(i, kMiB).ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(Prefetch({Key(i)}), 1u) << i;
    clock_.AdvanceMillis(1);
  }
  // Four MiB of HBM: the oldest HBM replicas made room (DRAM holds them).
  EXPECT_EQ(Media(Key(0)), kDram);
  EXPECT_EQ(Media(Key(5)), kHbm | kDram);
  EXPECT_LE(HbmUsed(), 4 * kMiB);
  EXPECT_GE(Hbm().dropped, 2u);
  // Above the high watermark (0.9) maintenance takes each pool to the low one.
  store_->admin().RunMaintenance();
  EXPECT_LE(HbmUsed(), static_cast<uint64_t>(0.8 * 4 * kMiB));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(*Get(Key(i)), Want(i, kMiB)) << i;
}

TEST_F(HbmStoreTest, PromotionGoesToThePoolWithMostRoom) {
  MakeHbm(16 * kMiB, 2 * kMiB, /*gpus=*/2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(PutI(i, kMiB).ok());
  ASSERT_EQ(Prefetch({Key(0), Key(1)}), 2u);
  EXPECT_GE(tier_->pools()[0]->allocated_bytes(), kMiB);
  EXPECT_GE(tier_->pools()[1]->allocated_bytes(), kMiB);
}

TEST_F(HbmStoreTest, RemoveAndUpsertDropEveryReplicaAndAnnounceOnce) {
  ASSERT_TRUE(PutI(1, 100000).ok());
  ASSERT_TRUE(PutI(2, 100000).ok());
  ASSERT_EQ(Prefetch({Key(1), Key(2)}), 2u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 2u);  // k1, k2 only in HBM
  observer_.Take();
  EXPECT_TRUE(store_->Remove({}, {"default", Key(1)}).ok());
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"removed default/k1 hbm"});
  ASSERT_TRUE(Put(Key(2), "new", 10, /*upsert=*/true).ok());
  EXPECT_EQ(observer_.Take(),
            (std::vector<std::string>{"replaced default/k2 hbm", "stored default/k2 dram"}));
  EXPECT_EQ(HbmUsed(), 0u);
  EXPECT_EQ(Hbm().objects, 0u);
  EXPECT_EQ(*Get(Key(2)), "newnewnewn");
  // In both media: one removal.
  ASSERT_EQ(Prefetch({Key(2)}), 1u);
  auto all = store_->RemoveAll({}, "default", /*force=*/false);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(observer_.Take(),
            (std::vector<std::string>{"removed default/k2 dram", "cleared default"}));
  EXPECT_EQ(HbmUsed(), 0u);
}

TEST_F(HbmStoreTest, SnapshotHasOneMemoryRecordPerObject) {
  ASSERT_TRUE(PutI(1, 1000).ok());
  ASSERT_TRUE(PutI(2, 1000).ok());
  ASSERT_EQ(Prefetch({Key(1), Key(2)}), 2u);
  ASSERT_EQ(EvictOneTier({Key(2)}), 1u);              // k2: DRAM only
  ASSERT_TRUE(store_->admin().EvictDownTo(0) >= 1u);  // k1: HBM only
  std::map<std::string, std::vector<Medium>> seen;
  store_->admin().ForEachReadable(
      [&](const ReplicaEvent& e) { seen[std::string(e.key)].push_back(e.medium); });
  EXPECT_EQ(seen[Key(1)], std::vector<Medium>{Medium::kHbm});
  EXPECT_EQ(seen.count(Key(2)), 0u);  // evicted from DRAM with no SSD
  ASSERT_TRUE(PutI(3, 1000).ok());
  ASSERT_EQ(Prefetch({Key(3)}), 1u);
  seen.clear();
  store_->admin().ForEachReadable(
      [&](const ReplicaEvent& e) { seen[std::string(e.key)].push_back(e.medium); });
  EXPECT_EQ(seen[Key(3)], std::vector<Medium>{Medium::kDram});
}

TEST_F(HbmStoreTest, LeasedDramCopyIsKeptWhileHbmMoves) {
  ASSERT_TRUE(PutI(1, 100000).ok());
  ASSERT_EQ(Prefetch({Key(1)}), 1u);
  auto l = store_->Lease({}, {"default", Key(1)});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(store_->admin().EvictDownTo(0), 0u);  // the DRAM replica is leased
  EXPECT_EQ(EvictOneTier({Key(1)}), 1u);          // the HBM one may go
  EXPECT_EQ(Media(Key(1)), kDram);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(l->data), l->size), Want(1, 100000));
  EXPECT_TRUE(store_->Release({}, l->lease_id).ok());
}

TEST_F(HbmStoreTest, FailingGpuCopiesAreErrorsAndCountedNotCrashes) {
  ASSERT_TRUE(PutI(1, 100000).ok());
  ASSERT_TRUE(PutI(2, 100000).ok());
  faults_->to_device = true;
  EXPECT_EQ(Prefetch({Key(1)}), 0u);  // not promoted; DRAM copy untouched
  EXPECT_EQ(Media(Key(1)), kDram);
  EXPECT_EQ(HbmUsed(), 0u);
  EXPECT_EQ(Hbm().copy_failures, 1u);
  faults_->to_device = false;
  ASSERT_EQ(Prefetch({Key(1), Key(2)}), 2u);
  ASSERT_EQ(store_->admin().EvictDownTo(0), 2u);
  faults_->to_host = true;
  // A get cannot copy it down: a clear error, the value still in HBM.
  auto v = Get(Key(1));
  EXPECT_EQ(v.code(), Code::kIoError);
  EXPECT_NE(v.status().message().find("injected"), std::string::npos);
  EXPECT_EQ(Media(Key(1)), kHbm);
  // An HBM victim that cannot be copied down is dropped: with no SSD, evicted.
  observer_.Take();
  EXPECT_EQ(EvictOneTier({Key(2)}), 1u);
  EXPECT_EQ(Media(Key(2)), 0u);
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"evicted default/k2 hbm"});
  EXPECT_EQ(Hbm().evicted, 1u);
  faults_->to_host = false;
  EXPECT_EQ(*Get(Key(1)), Want(1, 100000));
  EXPECT_EQ(Hbm().copy_failures, 3u);
}

TEST_F(HbmStoreTest, CopiesOfAnotherManagersValueStayInDram) {
  PutOptions o;
  o.dram_only = true;
  auto g = store_->Alloc({}, {"default", "copy"}, 4096, o);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  EXPECT_EQ(Prefetch({"copy"}), 0u);
  EXPECT_EQ(Media("copy"), kDram);
}

// A put into HBM, as a client copying from its GPU makes it: the grant names
// the pool, the client writes through its import, the commit makes it an HBM
// replica.
TEST_F(HbmStoreTest, PutsIntoHbmAndDeviceLeasesReadItInPlace) {
  PutOptions o;
  o.medium = Medium::kHbm;
  auto g = store_->Alloc({}, {"default", "dev"}, 300000, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->medium, Medium::kHbm);
  EXPECT_EQ(g->data, nullptr);
  const std::string value = Want(9, 300000);
  ASSERT_TRUE(tier_->pools()[g->pool]->Write(g->offset, value.data(), value.size()).ok());
  EXPECT_EQ(Media("dev"), 0u);  // not readable before the commit
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  EXPECT_EQ(Media("dev"), kHbm);
  EXPECT_EQ(observer_.Take(), std::vector<std::string>{"stored default/dev hbm"});
  EXPECT_EQ(Hbm().device_puts, 1u);
  EXPECT_EQ(Used(), 0u);  // no DRAM used

  // A device lease reads it where it is, without a copy into DRAM.
  auto l = store_->Lease({}, {"default", "dev"}, ReadHold::kLeaseDevice);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->medium, Medium::kHbm);
  EXPECT_EQ(l->offset, g->offset);
  std::string read(l->size, '\0');
  ASSERT_TRUE(tier_->pools()[l->pool]->Read(read.data(), l->offset, l->size).ok());
  EXPECT_EQ(read, value);
  EXPECT_EQ(Media("dev"), kHbm);
  EXPECT_EQ(Hbm().device_reads, 1u);
  // Leased: not moved down, and a remove hides it but keeps its range.
  EXPECT_EQ(EvictOneTier({"dev"}), 0u);
  EXPECT_EQ(Media("dev"), kHbm);
  const uint64_t used = HbmUsed();
  ASSERT_TRUE(store_->Remove({}, {"default", "dev"}).ok());
  EXPECT_EQ(Media("dev"), 0u);
  EXPECT_EQ(HbmUsed(), used);
  EXPECT_TRUE(store_->Release({}, l->lease_id).ok());
  EXPECT_EQ(HbmUsed(), 0u);
  // A host get of a value put into HBM copies it down.
  g = store_->Alloc({}, {"default", "dev2"}, 1000, o);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(tier_->pools()[g->pool]->Write(g->offset, value.data(), 1000).ok());
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  EXPECT_EQ(*Get("dev2"), value.substr(0, 1000));
  // A device lease of a value in DRAM only is an ordinary DRAM lease.
  ASSERT_TRUE(PutI(3, 5000).ok());
  l = store_->Lease({}, {"default", Key(3)}, ReadHold::kLeaseDevice);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->medium, Medium::kDram);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(l->data), l->size), Want(3, 5000));
  EXPECT_TRUE(store_->Release({}, l->lease_id).ok());
}

TEST_F(HbmStoreTest, DeviceLeasesExpireAndBatchLeasesMixMedia) {
  PutOptions o;
  o.medium = Medium::kHbm;
  std::vector<AllocItem> items = {{"a", 4096, o}, {"b", 8192, o}};
  auto grants = store_->BatchAlloc({}, "default", items);
  std::vector<uint64_t> ids;
  for (auto& g : grants) {
    ASSERT_TRUE(g.ok() && g->medium == Medium::kHbm);
    ids.push_back(g->alloc_id);
  }
  for (const Status& st : store_->BatchCommit({}, ids)) ASSERT_TRUE(st.ok());
  ASSERT_TRUE(PutI(1, 100).ok());
  std::vector<std::string_view> keys = {"a", "b", "k1", "absent"};
  auto leases = store_->BatchLease({}, "default", keys, ReadHold::kLeaseDevice);
  EXPECT_EQ(leases[0]->medium, Medium::kHbm);
  EXPECT_EQ(leases[1]->medium, Medium::kHbm);
  EXPECT_EQ(leases[2]->medium, Medium::kDram);
  EXPECT_EQ(leases[3].code(), Code::kNotFound);
  EXPECT_EQ(store_->admin().Stats().active_leases, 3u);
  ASSERT_TRUE(store_->Remove({}, {"default", "a"}).ok());
  clock_.AdvanceMillis(StoreOptions{}.lease_ms + 1);
  store_->admin().RunMaintenance();  // expires them: the removed one's range goes back
  EXPECT_EQ(store_->admin().Stats().active_leases, 0u);
  EXPECT_EQ(store_->Release({}, leases[0]->lease_id).code(), Code::kLeaseExpired);
  EXPECT_EQ(store_->Release({}, leases[1]->lease_id).code(), Code::kLeaseExpired);
  EXPECT_LT(HbmUsed(), 4096u + 8192u);
  EXPECT_EQ(Media("b"), kHbm);
}

TEST_F(HbmStoreTest, PutsIntoHbmFallBackToDramAndRevokedGrantsWaitForTheirSession) {
  PutOptions o;
  o.medium = Medium::kHbm;
  // Larger than the pool: DRAM.
  auto big = store_->Alloc({}, {"default", "big"}, 5 * kMiB, o);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->medium, Medium::kDram);
  EXPECT_NE(big->data, nullptr);
  ASSERT_TRUE(store_->Abort({}, big->alloc_id).ok());
  // A copy of another manager's value never goes to HBM.
  PutOptions copy = o;
  copy.dram_only = true;
  auto c = store_->Alloc({}, {"default", "copy"}, 100, copy);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->medium, Medium::kDram);
  ASSERT_TRUE(store_->Abort({}, c->alloc_id).ok());
  // A grant of a live session that times out: its HBM range is held until
  // the session ends (the writer may still be copying into it).
  auto g = store_->Alloc({5, 0}, {"default", "slow"}, 70000, o);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->medium, Medium::kHbm);
  clock_.AdvanceMillis(StoreOptions{}.alloc_timeout_ms + 1);
  store_->admin().RunMaintenance();
  EXPECT_EQ(store_->Commit({5, 0}, g->alloc_id).code(), Code::kNotFound);
  EXPECT_GE(HbmUsed(), 70000u);
  store_->EndSession(5);
  EXPECT_EQ(HbmUsed(), 0u);
  // An aborted one goes back at once; a plain put over an HBM value replaces it.
  g = store_->Alloc({}, {"default", "k"}, 1000, o);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(store_->Commit({}, g->alloc_id).ok());
  observer_.Take();
  ASSERT_TRUE(Put("k", "dram", 4, /*upsert=*/true).ok());
  EXPECT_EQ(observer_.Take(),
            (std::vector<std::string>{"replaced default/k hbm", "stored default/k dram"}));
  EXPECT_EQ(HbmUsed(), 0u);
}

}  // namespace
}  // namespace tierkv
