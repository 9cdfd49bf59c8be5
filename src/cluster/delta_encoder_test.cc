// DeltaEncoder: batches encoded once for all streams are the bytes a
// per-stream protobuf build gives, filtered by scope, split by size, trimmed
// to what readers need, and "behind" exactly when the journal lost a change.
#include "cluster/delta_encoder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tierkv {
namespace {

const std::string kNsA = "tierkv:v1:" + std::string(64, 'a');
const std::string kNsB = "tierkv:v1:" + std::string(64, 'b');

// Appends `n` changes: puts and removals of long keys in two namespaces and
// none, with a tenant cleared every 7th.
void Feed(ChangeFeed& feed, int n, int salt = 0) {
  for (int i = 0; i < n; ++i) {
    const std::string key = "key-" + std::to_string(salt) + "-" + std::to_string(i) +
                            std::string(40, static_cast<char>('a' + i % 26));
    const std::string& ns = i % 3 == 0 ? kNsA : i % 3 == 1 ? kNsB : std::string();
    if (i % 7 == 6) {
      feed.AppendCleared("tenant-" + std::to_string(i % 2));
      continue;
    }
    ReplicaEvent e;
    e.tenant = i % 2 ? "tenant-1" : "tenant-0";
    e.key = key;
    e.name_space = ns;
    e.medium = i % 5 == 0 ? Medium::kSsd : Medium::kDram;
    e.size = 4096 + i;
    e.generation = 100 + i;
    feed.Append(i % 4 == 3 ? ChangeKind::kRemoved : ChangeKind::kStored, e);
  }
}

peer::Scope MakeScope(peer::Scope::Kind kind, std::vector<std::string> names = {}) {
  peer::Scope s;
  s.set_kind(kind);
  for (const auto& n : names) s.add_namespaces(n);
  return s;
}

// The batch (after, to] built the way a stream built it before the encoder:
// the feed's changes, filtered, each a protobuf record of its own.
std::string Reference(const ChangeFeed& feed, uint64_t after, uint64_t to,
                      const InventoryScope& scope) {
  peer::DeltaBatch batch;
  batch.set_from_sequence(after + 1);
  batch.set_to_sequence(to);
  for (const Change& c : feed.ReadAfter(after, to - after).changes) {
    if (c.kind == ChangeKind::kCleared || scope.Admits(c.name_space)) {
      ToInventoryChange(c, batch.add_changes());
    }
  }
  return batch.SerializeAsString();
}

// A feed with `changes` changes, an encoder over it, and the scope of all.
struct Rig {
  explicit Rig(int changes, size_t journal = 16 << 20) : feed(journal), encoder(feed) {
    Feed(feed, changes);
  }
  ChangeFeed feed;
  DeltaEncoder encoder;
  const InventoryScope all{MakeScope(peer::Scope::ALL)};
};

TEST(DeltaEncoder, BatchesAreTheBytesOfAPerStreamBuildInEveryScope) {
  Rig rig(200);
  auto& [feed, encoder, all] = rig;
  const InventoryScope a(MakeScope(peer::Scope::EXACT, {kNsA}));
  const InventoryScope none(MakeScope(peer::Scope::EMPTY));
  DeltaEncoder::Reader ra(encoder, 0), rb(encoder, 0), rc(encoder, 50);
  std::string out;
  struct Case {
    DeltaEncoder::Reader* reader;
    const InventoryScope* scope;
    uint64_t until;
  };
  for (const Case& k :
       {Case{&ra, &all, 120}, Case{&rb, &a, 200}, Case{&rc, &none, 200}, Case{&ra, &all, 200}}) {
    const uint64_t after = k.reader->after();
    const DeltaEncoder::Batch b = encoder.Next(*k.reader, k.until, *k.scope, 1 << 20, out);
    ASSERT_FALSE(b.behind);
    EXPECT_EQ(b.from, after + 1);
    EXPECT_EQ(b.to, k.until);
    EXPECT_EQ(k.reader->after(), k.until);
    EXPECT_EQ(out, Reference(feed, after, k.until, *k.scope)) << "after " << after;
    peer::DeltaBatch parsed;
    ASSERT_TRUE(parsed.ParseFromString(out));
    EXPECT_EQ(static_cast<size_t>(parsed.changes_size()), b.changes);
  }
  // The empty scope still gets every cleared tenant, and nothing else.
  peer::DeltaBatch parsed;
  ASSERT_TRUE(parsed.ParseFromString(Reference(feed, 50, 200, none)));
  ASSERT_GT(parsed.changes_size(), 0);
  for (const auto& ch : parsed.changes()) EXPECT_EQ(ch.kind(), peer::InventoryChange::CLEARED);
}

TEST(DeltaEncoder, AFrameCarryingTheBytesIsTheFrameProtobufWouldWrite) {
  Rig rig(30);
  auto& [feed, encoder, all] = rig;
  DeltaEncoder::Reader reader(encoder, 0);
  peer::InventoryFrame encoded;
  std::string& delta = UnparsedDelta(encoded);
  ASSERT_FALSE(encoder.Next(reader, 30, all, 1 << 20, delta).behind);
  peer::InventoryFrame expected;
  ASSERT_TRUE(expected.mutable_delta()->ParseFromString(Reference(feed, 0, 30, all)));
  EXPECT_EQ(encoded.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(encoded.ByteSizeLong(), expected.ByteSizeLong());
  peer::InventoryFrame received;
  ASSERT_TRUE(received.ParseFromString(encoded.SerializeAsString()));
  ASSERT_TRUE(received.has_delta());
  EXPECT_EQ(received.delta().changes_size(), 30);  // every change, cleared tenants too
  EXPECT_EQ(received.delta().to_sequence(), 30u);
}

TEST(DeltaEncoder, ABatchEndsAfterTheChangeThatReachesMaxBytesAndTheNextGoesOn) {
  Rig rig(100);
  auto& [feed, encoder, all] = rig;
  DeltaEncoder::Reader reader(encoder, 0);
  std::string out;
  uint64_t expect_from = 1;
  int batches = 0;
  while (reader.after() < 100) {
    const DeltaEncoder::Batch b = encoder.Next(reader, 100, all, 1000, out);
    ASSERT_FALSE(b.behind);
    ASSERT_EQ(b.from, expect_from);
    ASSERT_GE(b.to, b.from);
    EXPECT_EQ(out, Reference(feed, b.from - 1, b.to, all));
    // Every batch but the last reaches max_bytes only with its last change.
    peer::DeltaBatch parsed;
    ASSERT_TRUE(parsed.ParseFromString(out));
    size_t bytes = 0;
    for (int i = 0; i + 1 < parsed.changes_size(); ++i) {
      peer::DeltaBatch one;  // a change's bytes in a batch: tag, length, record
      *one.add_changes() = parsed.changes(i);
      bytes += one.ByteSizeLong();
    }
    EXPECT_LT(bytes, 1000u);
    expect_from = b.to + 1;
    ++batches;
  }
  EXPECT_GT(batches, 3);
  EXPECT_LT(batches, 100);
}

TEST(DeltaEncoder, AReaderIsBehindExactlyWhenTheJournalLostItsNextChange) {
  Rig rig(0, /*journal=*/20000);  // a few dozen changes
  auto& [feed, encoder, all] = rig;
  DeltaEncoder::Reader slow(encoder, 0), fast(encoder, 0);
  std::string out;
  Feed(feed, 10);
  ASSERT_FALSE(encoder.Next(fast, 10, all, 1 << 20, out).behind);
  Feed(feed, 500, 1);  // far more than the journal keeps
  const uint64_t last = feed.last_sequence();
  const FeedRead probe = feed.ReadAfter(last - 1, 1);
  ASSERT_GT(probe.first_kept, 11u);
  out = "untouched";
  DeltaEncoder::Batch b = encoder.Next(slow, last, all, 1 << 20, out);
  EXPECT_TRUE(b.behind);
  EXPECT_EQ(b.oldest_kept, probe.first_kept);
  EXPECT_EQ(out, "untouched");
  EXPECT_EQ(slow.after(), 0u);
  b = encoder.Next(fast, last, all, 1 << 20, out);
  EXPECT_TRUE(b.behind);  // its next change (11) is gone too
  // A reader that starts within the journal is served.
  DeltaEncoder::Reader fresh(encoder, probe.first_kept - 1);
  b = encoder.Next(fresh, last, all, 1 << 20, out);
  ASSERT_FALSE(b.behind);
  EXPECT_EQ(out, Reference(feed, probe.first_kept - 1, last, all));
}

TEST(DeltaEncoder, KeepsOnlyWhatItsOldestReaderNeedsAndNothingWithoutReaders) {
  Rig rig(100);
  auto& [feed, encoder, all] = rig;
  std::string out;
  {
    DeltaEncoder::Reader a(encoder, 0), b(encoder, 0);
    ASSERT_FALSE(encoder.Next(a, 100, all, 1 << 20, out).behind);
    EXPECT_EQ(encoder.held_changes(), 100u);  // b still needs them all
    ASSERT_FALSE(encoder.Next(b, 60, all, 1 << 20, out).behind);
    EXPECT_EQ(encoder.held_changes(), 40u);  // 61..100
    ASSERT_FALSE(encoder.Next(b, 100, all, 1 << 20, out).behind);
    EXPECT_EQ(encoder.held_changes(), 0u);
    Feed(feed, 10, 1);
    ASSERT_FALSE(encoder.Next(a, 110, all, 1 << 20, out).behind);
    EXPECT_EQ(encoder.held_changes(), 10u);
    EXPECT_GT(encoder.held_bytes(), 0u);
    // A reader older than what is held starts the buffer over, and both
    // are served from it.
    DeltaEncoder::Reader late(encoder, 30);
    ASSERT_FALSE(encoder.Next(late, 110, all, 1 << 20, out).behind);
    EXPECT_EQ(out, Reference(feed, 30, 110, all));
    Feed(feed, 5, 2);
    ASSERT_FALSE(encoder.Next(b, 115, all, 1 << 20, out).behind);
    EXPECT_EQ(out, Reference(feed, 100, 115, all));
  }
  EXPECT_EQ(encoder.held_changes(), 0u);
  EXPECT_EQ(encoder.held_bytes(), 0u);
}

TEST(DeltaEncoder, NothingNewIsAnEmptyRangeAndMovesNoReader) {
  Rig rig(5);
  auto& [feed, encoder, all] = rig;
  DeltaEncoder::Reader reader(encoder, 5);
  std::string out;
  DeltaEncoder::Batch b = encoder.Next(reader, 5, all, 1 << 20, out);
  EXPECT_FALSE(b.behind);
  EXPECT_LT(b.to, b.from);
  b = encoder.Next(reader, 9, all, 1 << 20, out);  // past the newest change
  EXPECT_FALSE(b.behind);
  EXPECT_EQ(b.to, 5u);
  EXPECT_EQ(reader.after(), 5u);
}

TEST(DeltaEncoder, ReadersOnTheirOwnThreadsWhileChangesArriveGetEveryChangeOnce) {
  Rig rig(0, 64 << 20);
  auto& [feed, encoder, all] = rig;
  const InventoryScope a(MakeScope(peer::Scope::EXACT, {kNsA}));
  constexpr int kRounds = 40, kPerRound = 50;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int r = 0; r < kRounds; ++r) Feed(feed, kPerRound, r);
    done = true;
  });
  const uint64_t total = uint64_t{kRounds} * kPerRound;
  std::vector<std::string> failures(4);
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      const InventoryScope& scope = t % 2 ? a : all;
      DeltaEncoder::Reader reader(encoder, 0);
      std::string out, got;
      peer::DeltaBatch batch;
      uint64_t expect_from = 1;
      while (reader.after() < total) {
        const uint64_t until = feed.last_sequence();
        const DeltaEncoder::Batch b = encoder.Next(reader, until, scope, 2000, out);
        if (b.behind || b.from != expect_from) {
          failures[t] = "behind or not contiguous";
          return;
        }
        if (b.to < b.from) {
          std::this_thread::yield();
          continue;
        }
        peer::DeltaBatch part;
        if (!part.ParseFromString(out)) {
          failures[t] = "unparsable batch";
          return;
        }
        for (const auto& c : part.changes()) *batch.add_changes() = c;
        expect_from = b.to + 1;
      }
      got = batch.SerializeAsString();
      peer::DeltaBatch whole;
      (void)whole.ParseFromString(Reference(feed, 0, total, scope));
      whole.clear_from_sequence();
      whole.clear_to_sequence();
      if (got != whole.SerializeAsString()) failures[t] = "changes differ from the feed's";
    });
  }
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_TRUE(done);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "reader " << t;
  EXPECT_EQ(encoder.held_bytes(), 0u);
}

}  // namespace
}  // namespace tierkv
