// The SSD tier's media layer: blob headers, the write/read/free cycle, and
// recovery over good, duplicated, freed, torn and corrupted blobs, through an
// in-memory BlockFile that can fail on demand, and on a real file with both
// I/O engines.
#include "media/ssd_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>

#include "media/mem_block_file.h"

namespace tierkv {
namespace {

using MemFile = MemBlockFile;

// A 4 KiB-aligned value buffer, padded.
struct Value {
  explicit Value(size_t n, char fill) : size(n) {
    const size_t padded = (n + 4095) / 4096 * 4096;
    data = static_cast<char*>(std::aligned_alloc(4096, padded));
    std::memset(data, fill, padded);
  }
  ~Value() { std::free(data); }
  size_t size;
  char* data;
};

BlobHeader Header(std::string key, uint64_t size) {
  BlobHeader h;
  h.tenant = "default";
  h.key = std::move(key);
  h.group_id = "g";
  h.size = size;
  return h;
}

std::unique_ptr<SsdTier> OpenOn(std::shared_ptr<std::string> bytes, std::vector<SsdBlob>* blobs,
                                SsdRecoveryStats* stats, MemFile** file = nullptr) {
  auto f = std::make_unique<MemFile>(std::move(bytes));
  if (file) *file = f.get();
  auto t = SsdTier::Open(std::move(f), blobs, stats);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

// An SSD tier over in-memory bytes that a test reopens as a restart would.
struct MemTier {
  explicit MemTier(size_t size) : bytes(std::make_shared<std::string>(size, '\0')) { Reopen(); }
  // Drops the tier and recovers a new one from the same bytes.
  void Reopen() {
    tier.reset();
    blobs.clear();
    stats = {};
    tier = OpenOn(bytes, &blobs, &stats, &file);
  }
  std::shared_ptr<std::string> bytes;
  std::vector<SsdBlob> blobs;  // what the last (re)open recovered
  SsdRecoveryStats stats;
  MemFile* file = nullptr;
  std::unique_ptr<SsdTier> tier;
};

TEST(BlobHeader, RoundTripsAndRejectsDamage) {
  BlobHeader h = Header("prefix/abc", 12345);
  h.value_checksum = 77;
  h.generation = 9;
  Result<std::string> block = EncodeBlobHeader(h);
  ASSERT_TRUE(block.ok());
  ASSERT_EQ(block->size(), kBlobHeaderBytes);
  Result<BlobHeader> back = DecodeBlobHeader(*block);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, "prefix/abc");
  EXPECT_EQ(back->group_id, "g");
  EXPECT_EQ(back->size, 12345u);
  EXPECT_EQ(back->value_checksum, 77u);
  EXPECT_EQ(back->generation, 9u);

  EXPECT_EQ(DecodeBlobHeader(std::string(kBlobHeaderBytes, '\0')).code(), Code::kNotFound);
  std::string flipped = *block;
  flipped[100] ^= 1;  // inside the names: only the checksum can tell
  EXPECT_NE(DecodeBlobHeader(flipped).status().message().find("checksum"), std::string::npos);
  std::string flags = *block;
  flags[6] = 1;  // outside the checksummed range: rejected by value (found by the fuzzer)
  EXPECT_NE(DecodeBlobHeader(flags).status().message().find("flags"), std::string::npos);
  BlobHeader huge = h;
  huge.size = kMaxBlobValueBytes + 1;  // its footprint would overflow
  EXPECT_EQ(EncodeBlobHeader(huge).code(), Code::kInvalidArgument);
  huge.size = 0;
  EXPECT_EQ(EncodeBlobHeader(huge).code(), Code::kInvalidArgument);
  std::string magic = *block;
  magic[0] ^= 0x55;  // not a blob at all, e.g. the inside of a value
  EXPECT_EQ(DecodeBlobHeader(magic).code(), Code::kNotFound);
  std::string version = *block;
  version[4] = 7;
  EXPECT_NE(DecodeBlobHeader(version).status().message().find("version 7"), std::string::npos);
  EXPECT_EQ(EncodeBlobHeader(Header(std::string(5000, 'k'), 1)).code(), Code::kInvalidArgument);
  EXPECT_EQ(BlobFootprint(1), 8192u);
  EXPECT_EQ(BlobFootprint(4096), 8192u);
  EXPECT_EQ(BlobFootprint(4097), 12288u);
}

TEST(SsdTier, WritesReadsAndRecoversAfterReopening) {
  auto bytes = std::make_shared<std::string>(1 << 20, '\0');
  std::vector<SsdBlob> none;
  SsdRecoveryStats stats;
  auto tier = OpenOn(bytes, &none, &stats);
  EXPECT_TRUE(none.empty());
  Value a(5000, 'a'), b(100, 'b'), c(4096, 'c');
  auto ba = tier->Write(Header("a", a.size), a.data);
  auto bb = tier->Write(Header("b", b.size), b.data);
  auto bc = tier->Write(Header("c", c.size), c.data);
  ASSERT_TRUE(ba.ok() && bb.ok() && bc.ok());
  Value out(5000, 0);
  ASSERT_TRUE(tier->Read(*ba, out.data).ok());
  EXPECT_EQ(std::string(out.data, 5000), std::string(5000, 'a'));
  ASSERT_TRUE(tier->Free(*bb).ok());
  tier.reset();  // "restart"

  std::vector<SsdBlob> blobs;
  tier = OpenOn(bytes, &blobs, &stats);
  EXPECT_EQ(stats.blobs, 2u);  // the freed blob does not come back
  EXPECT_EQ(stats.corrupt, 0u);
  EXPECT_EQ(stats.bytes, 5000u + 4096u);
  ASSERT_EQ(blobs.size(), 2u);
  for (const SsdBlob& blob : blobs) {
    Value v(blob.header.size, 0);
    ASSERT_TRUE(tier->Read(blob, v.data).ok());
    EXPECT_EQ(v.data[0], blob.header.key[0]);
    EXPECT_EQ(blob.header.group_id, "g");
  }
  // Recovered extents are reserved: new blobs go elsewhere.
  Value d(4096, 'd');
  auto bd = tier->Write(Header("d", d.size), d.data);
  ASSERT_TRUE(bd.ok());
  for (const SsdBlob& blob : blobs) EXPECT_NE(bd->extent.offset, blob.extent.offset);
}

TEST(SsdTier, NewestGenerationWinsAndOldCopiesAreCleared) {
  auto bytes = std::make_shared<std::string>(1 << 20, '\0');
  std::vector<SsdBlob> blobs;
  SsdRecoveryStats stats;
  auto tier = OpenOn(bytes, &blobs, &stats);
  Value v1(4096, '1'), v2(8192, '2');
  ASSERT_TRUE(tier->Write(Header("k", v1.size), v1.data).ok());
  ASSERT_TRUE(tier->Write(Header("k", v2.size), v2.data).ok());  // crash before freeing v1
  tier.reset();
  tier = OpenOn(bytes, &blobs, &stats);
  ASSERT_EQ(blobs.size(), 1u);
  EXPECT_EQ(blobs[0].header.size, 8192u);
  EXPECT_EQ(stats.duplicates, 1u);
  tier.reset();
  std::vector<SsdBlob> again;
  tier = OpenOn(bytes, &again, &stats);
  EXPECT_EQ(stats.duplicates, 0u);  // the old copy was cleared for good
  EXPECT_EQ(again.size(), 1u);
}

TEST(SsdTier, TornAndCorruptBlobsAreDroppedAndCounted) {
  MemTier m(1 << 20);
  Value good(4096, 'g'), bad_header(4096, 'h'), bad_value(4096, 'v'), torn(4096, 't');
  auto g = m.tier->Write(Header("good", good.size), good.data);
  auto h = m.tier->Write(Header("bad-header", bad_header.size), bad_header.data);
  auto v = m.tier->Write(Header("bad-value", bad_value.size), bad_value.data);
  ASSERT_TRUE(g.ok() && h.ok() && v.ok());
  // A crash between the value and the header of the next blob: the header
  // write (the second write of that blob) never happens.
  m.file->fail_write = [](int call, uint64_t) { return call == 8; };
  Status st = m.tier->Write(Header("torn", torn.size), torn.data).status();
  EXPECT_EQ(st.code(), Code::kIoError);
  (*m.bytes)[h->extent.offset + 60] ^= 0x20;                     // a damaged header name
  (*m.bytes)[v->extent.offset + kBlobHeaderBytes + 10] ^= 0x20;  // a damaged value

  m.Reopen();
  EXPECT_EQ(m.stats.corrupt, 1u);
  ASSERT_EQ(m.stats.blobs, 2u);  // good and bad-value (its header is intact)
  for (const SsdBlob& blob : m.blobs) {
    Value out(4096, 0);
    Status read = m.tier->Read(blob, out.data);
    if (blob.header.key == "good") {
      EXPECT_TRUE(read.ok());
    } else {
      EXPECT_EQ(blob.header.key, "bad-value");
      EXPECT_EQ(read.code(), Code::kProtocolError);  // never served
    }
  }
}

TEST(SsdTier, AHeaderThatLandsWithoutItsValueIsClearedAndItsExtentReused) {
  MemTier m(1 << 20);
  Value kept(4096, 'k'), lost(8192, 'l');
  ASSERT_TRUE(m.tier->Write(Header("kept", kept.size), kept.data).ok());
  const uint64_t free_before = m.tier->Stats().free;
  // The value's write (call 3) fails; the header (call 4) still lands, as it
  // may on a device where both are in flight together.
  m.file->fail_write = [](int call, uint64_t) { return call == 3; };
  EXPECT_EQ(m.tier->Write(Header("lost", lost.size), lost.data).code(), Code::kIoError);
  EXPECT_EQ(m.tier->Stats().free, free_before);  // the extent is free again
  // ...and its header block is zero: no recovery takes it for a blob.
  m.Reopen();
  EXPECT_EQ(m.stats.corrupt, 0u);
  ASSERT_EQ(m.blobs.size(), 1u);
  EXPECT_EQ(m.blobs[0].header.key, "kept");
  Value again(8192, 'a');
  auto reused = m.tier->Write(Header("again", again.size), again.data);
  ASSERT_TRUE(reused.ok());
  m.Reopen();
  EXPECT_EQ(m.stats.corrupt, 0u);
  ASSERT_EQ(m.blobs.size(), 2u);
  for (const SsdBlob& blob : m.blobs) {
    EXPECT_NE(blob.header.key, "lost");
    Value out(blob.header.size, 0);
    EXPECT_TRUE(m.tier->Read(blob, out.data).ok()) << blob.header.key;
  }

  // When the header cannot be zeroed either, the extent stays out of use.
  const uint64_t free_now = m.tier->Stats().free;
  m.file->fail_write = [](int, uint64_t) { return true; };
  EXPECT_EQ(m.tier->Write(Header("lost", lost.size), lost.data).code(), Code::kIoError);
  EXPECT_LT(m.tier->Stats().free, free_now);
}

TEST(SsdTier, AHeaderThatRunsPastTheEndIsCorrupt) {
  auto bytes = std::make_shared<std::string>(64 << 10, '\0');
  BlobHeader h = Header("huge", 1 << 30);
  std::string block = *EncodeBlobHeader(h);
  std::memcpy(bytes->data() + (32 << 10), block.data(), block.size());
  std::vector<SsdBlob> blobs;
  SsdRecoveryStats stats;
  auto tier = OpenOn(bytes, &blobs, &stats);
  EXPECT_TRUE(blobs.empty());
  EXPECT_EQ(stats.corrupt, 1u);
}

TEST(SsdTier, FullAndFailingDevices) {
  MemTier m(16 << 10);
  Value v(4096, 'x');
  ASSERT_TRUE(m.tier->Write(Header("a", v.size), v.data).ok());
  ASSERT_TRUE(m.tier->Write(Header("b", v.size), v.data).ok());
  EXPECT_EQ(m.tier->Write(Header("c", v.size), v.data).code(), Code::kNoSpace);
  m.file->fail_write = [](int, uint64_t) { return true; };
  EXPECT_EQ(m.tier->Stats().free, 0u);
  // A failed free keeps the extent out of reuse.
  const SsdBlob first{{0, 8192}, Header("a", 4096)};
  EXPECT_EQ(m.tier->Free(first).code(), Code::kIoError);
  EXPECT_EQ(m.tier->Stats().free, 0u);
}

class RealFileTest : public ::testing::TestWithParam<bool> {};

TEST_P(RealFileTest, BothEnginesWriteReadAndRecover) {
  char tmpl[] = "/tmp/tierkv-ssd-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/ssd.data";
  BlockFileOptions o;
  o.use_io_uring = GetParam();
  {
    auto f = OpenBlockFile(path, 8 << 20, o);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    if (!GetParam()) {
      EXPECT_EQ((*f)->engine(), "pread");
    }
    std::vector<SsdBlob> blobs;
    SsdRecoveryStats stats;
    auto tier = SsdTier::Open(std::move(*f), &blobs, &stats);
    ASSERT_TRUE(tier.ok());
    Value v(1 << 20, 'r');
    auto b = (*tier)->Write(Header("big", v.size), v.data);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Value out(1 << 20, 0);
    ASSERT_TRUE((*tier)->Read(*b, out.data).ok());
    EXPECT_EQ(std::memcmp(out.data, v.data, v.size), 0);
  }
  auto f = OpenBlockFile(path, 8 << 20, o);
  ASSERT_TRUE(f.ok());
  std::vector<SsdBlob> blobs;
  SsdRecoveryStats stats;
  auto tier = SsdTier::Open(std::move(*f), &blobs, &stats);
  ASSERT_TRUE(tier.ok());
  ASSERT_EQ(blobs.size(), 1u);
  EXPECT_EQ(blobs[0].header.key, "big");
  std::filesystem::remove_all(dir);
}

TEST_P(RealFileTest, PiecesArriveInOrderAndOverlappedWorkRuns) {
  char tmpl[] = "/tmp/tierkv-ssd-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  BlockFileOptions o;
  o.use_io_uring = GetParam();
  auto f = OpenBlockFile(dir + "/ssd.data", 8 << 20, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr size_t kLen = 3 * (1 << 20) + 8192;  // not a multiple of the piece
  Value v(kLen, 0);
  for (size_t i = 0; i < kLen; ++i) v.data[i] = static_cast<char>(i * 7 + i / 4096);
  // The trailer is filled by the overlapped work, so only a trailer written
  // after the work has run carries it; 128 KiB pieces are more than a ring
  // holds at once, so the trailer also waits for pieces still to be issued.
  Value trailer(4096, 0);
  const BlockFile::Trailer then{0, trailer.data, 4096};
  bool worked = false;
  ASSERT_TRUE((*f)->WriteOverlapped(
                      4096, v.data, kLen, 128 << 10,
                      [&] {
                        std::memset(trailer.data, 'T', 4096);
                        worked = true;
                      },
                      &then)
                  .ok());
  EXPECT_TRUE(worked);
  Value head(4096, 0);
  ASSERT_TRUE((*f)->Read(0, head.data, 4096).ok());
  EXPECT_EQ(std::memcmp(head.data, trailer.data, 4096), 0);
  Value out(kLen, 0);
  size_t next = 0;
  ValueHasher hasher;
  ASSERT_TRUE((*f)->ReadPieces(4096, out.data, kLen, 256 << 10,
                               [&](const char* p, size_t n) {
                                 EXPECT_EQ(p, out.data + next);  // in order, contiguous
                                 EXPECT_EQ(std::memcmp(p, v.data + next, n), 0);
                                 hasher.Update(p, n);
                                 next += n;
                               })
                  .ok());
  EXPECT_EQ(next, kLen);
  EXPECT_EQ(hasher.Digest(), ValueChecksum(v.data, kLen));  // streaming == one shot
  // A read past the end is an error, not a short result.
  EXPECT_EQ((*f)->ReadPieces(8 << 20, out.data, 4096, 4096, [](const char*, size_t) {}).code(),
            Code::kIoError);
  std::filesystem::remove_all(dir);
}

TEST(BlockFile, SecondOpenOfALockedFileIsRefused) {
  char tmpl[] = "/tmp/tierkv-ssd-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto first = OpenBlockFile(dir + "/ssd.data", 1 << 20);
  ASSERT_TRUE(first.ok());
  auto second = OpenBlockFile(dir + "/ssd.data", 1 << 20);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
  first->reset();
  EXPECT_TRUE(OpenBlockFile(dir + "/ssd.data", 1 << 20).ok());  // released on close
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Engines, RealFileTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "IoUring" : "Pread"; });

TEST(BlockFile, UnwritableLocationIsAnErrorNamingThePath) {
  auto f = OpenBlockFile("/nonexistent-dir/ssd.data", 1 << 20);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.code(), Code::kIoError);
  EXPECT_NE(f.status().message().find("/nonexistent-dir/ssd.data"), std::string::npos);
}

}  // namespace
}  // namespace tierkv
