// The change feed: sequences, generations, the bounded journal, and snapshots
// whose watermark joins them with no gap and no duplicate under concurrent puts.
#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "store/change_feed.h"
#include "store/store_test_util.h"

namespace tierkv {
namespace {

// Records each announcement's sequence and generation.
class SequenceObserver : public ReplicaObserver {
 public:
  void OnStored(const ReplicaEvent& e) override { Add("stored", e); }
  void OnRemoved(const ReplicaEvent& e) override { Add("removed", e); }
  void OnTenantCleared(std::string_view) override {}
  struct Seen {
    std::string what, key;
    uint64_t sequence, generation;
  };
  std::vector<Seen> seen;

 private:
  void Add(const char* what, const ReplicaEvent& e) {
    seen.push_back({what, std::string(e.key), e.sequence, e.generation});
  }
};

std::unique_ptr<Store> MakeStore(size_t journal_bytes, ReplicaObserver* observer = nullptr,
                                 uint32_t shards = 64) {
  StoreOptions o;
  o.journal_bytes = journal_bytes;
  o.shards = shards;
  auto pool = DramPool::Create(256 << 20);  // no eviction in these tests
  auto created = Store::Create(o, std::move(*pool));
  EXPECT_TRUE(created.ok());
  if (observer != nullptr) (*created)->AddObserver(observer);
  return std::move(*created);
}

Status Put(Store& s, const std::string& key, bool upsert = false, const std::string& tenant = "t") {
  auto g = s.Alloc({}, {tenant, key}, 64, {"", upsert});
  if (!g.ok()) return g.status();
  return s.Commit({}, g->alloc_id);
}

TEST(ChangeFeed, SequencesIncreaseAndGenerationsChangeWithTheValue) {
  SequenceObserver obs;
  auto store = MakeStore(0, &obs);
  ASSERT_TRUE(Put(*store, "a").ok());
  ASSERT_TRUE(Put(*store, "b").ok());
  ASSERT_TRUE(Put(*store, "a", /*upsert=*/true).ok());
  ASSERT_TRUE(store->Remove({}, {"t", "a"}).ok());
  ASSERT_EQ(obs.seen.size(), 5u);  // stored a, stored b, removed a (old), stored a, removed a
  for (size_t i = 0; i < obs.seen.size(); ++i) EXPECT_EQ(obs.seen[i].sequence, i + 1);
  EXPECT_NE(obs.seen[0].generation, obs.seen[1].generation);
  EXPECT_EQ(obs.seen[2].what, "removed");
  EXPECT_EQ(obs.seen[2].generation, obs.seen[0].generation);  // the old value's
  EXPECT_NE(obs.seen[3].generation, obs.seen[0].generation);  // the new value's
  EXPECT_EQ(obs.seen[4].generation, obs.seen[3].generation);
  EXPECT_EQ(store->feed().last_sequence(), 5u);
}

TEST(ChangeFeed, TheJournalKeepsRecentChangesInOrderAndSaysWhenOnesAreGone) {
  auto store = MakeStore(64 << 10);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Put(*store, "k" + std::to_string(i)).ok());
  ASSERT_TRUE(store->RemoveAll({}, "t", /*force=*/true).ok());
  FeedRead r = store->feed().ReadAfter(0, 100);
  EXPECT_FALSE(r.behind);
  ASSERT_EQ(r.changes.size(), 21u);  // 10 stored, 10 removed, 1 cleared
  for (size_t i = 0; i < r.changes.size(); ++i) EXPECT_EQ(r.changes[i].sequence, i + 1);
  EXPECT_EQ(r.changes[0].kind, ChangeKind::kStored);
  EXPECT_EQ(r.changes[0].key, "k0");
  EXPECT_EQ(r.changes.back().kind, ChangeKind::kCleared);
  EXPECT_EQ(r.changes.back().tenant, "t");
  EXPECT_EQ(store->feed().ReadAfter(18, 2).changes.size(), 2u);
  EXPECT_TRUE(store->feed().ReadAfter(21, 10).changes.empty());

  // A small budget keeps only the newest changes; older positions are "behind".
  auto small = MakeStore(4 * sizeof(Change));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Put(*small, "k" + std::to_string(i)).ok());
  EXPECT_LE(small->feed().journal_bytes(), 4 * sizeof(Change));
  FeedRead old = small->feed().ReadAfter(0, 10);
  EXPECT_TRUE(old.behind);
  EXPECT_TRUE(old.changes.empty());
  FeedRead recent = small->feed().ReadAfter(old.first_kept - 1, 10);
  EXPECT_FALSE(recent.behind);
  ASSERT_FALSE(recent.changes.empty());
  EXPECT_EQ(recent.changes.back().sequence, 100u);
}

// An upsert's two announcements (the old value removed as replaced, the new
// one stored) are never split by the stable sequence, whatever is announced
// between them, and a value replaced on two media opens the pair once.
TEST(ChangeFeed, TheStableSequenceNeverEndsInTheMiddleOfAnUpsert) {
  ChangeFeed feed(1 << 20);
  auto event = [](std::string_view key, Medium medium, RemoveCause cause) {
    ReplicaEvent e;
    e.tenant = "t";
    e.key = key;
    e.medium = medium;
    e.cause = cause;
    return e;
  };
  feed.Append(ChangeKind::kStored, event("a", Medium::kDram, RemoveCause::kRemoved));
  EXPECT_EQ(feed.stable_sequence(), 1u);
  feed.Append(ChangeKind::kRemoved, event("a", Medium::kDram, RemoveCause::kReplaced));
  EXPECT_EQ(feed.stable_sequence(), 1u);
  feed.Append(ChangeKind::kRemoved, event("a", Medium::kSsd, RemoveCause::kReplaced));
  feed.Append(ChangeKind::kStored, event("b", Medium::kDram, RemoveCause::kRemoved));
  feed.Append(ChangeKind::kRemoved, event("b", Medium::kDram, RemoveCause::kRemoved));
  EXPECT_EQ(feed.stable_sequence(), 1u);
  EXPECT_FALSE(feed.WaitAfter(1, 0));
  feed.Append(ChangeKind::kStored, event("a", Medium::kDram, RemoveCause::kRemoved));
  EXPECT_EQ(feed.stable_sequence(), 6u);
  EXPECT_EQ(feed.last_sequence(), 6u);
  EXPECT_TRUE(feed.WaitAfter(1, 0));
  // Without a journal there is nothing to hold back.
  ChangeFeed bare(0);
  bare.Append(ChangeKind::kRemoved, event("a", Medium::kDram, RemoveCause::kReplaced));
  EXPECT_EQ(bare.stable_sequence(), 1u);
}

// Upserts on a store: the stable sequence never stops between a replaced
// value's removal and its replacement.
TEST(ChangeFeed, AnUpsertsRemovalAndStoreAreStableTogether) {
  auto store = MakeStore(1 << 20);
  ASSERT_TRUE(Put(*store, "k").ok());
  ASSERT_TRUE(Put(*store, "k", true).ok());
  EXPECT_EQ(store->feed().stable_sequence(), store->feed().last_sequence());
  const FeedRead r = store->feed().ReadAfter(0, 10);
  ASSERT_EQ(r.changes.size(), 3u);
  EXPECT_EQ(r.changes[1].cause, RemoveCause::kReplaced);
}

TEST(ChangeFeed, AReusedReadHoldsExactlyTheLastReadsChanges) {
  auto store = MakeStore(64 << 10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Put(*store, "a-long-key-that-needs-its-own-buffer-" + std::to_string(i)).ok());
  }
  FeedRead r;
  store->feed().ReadAfter(0, 8, r);
  ASSERT_EQ(r.changes.size(), 8u);
  store->feed().ReadAfter(7, 8, r);  // fewer than last time, over the same entries
  EXPECT_FALSE(r.behind);
  EXPECT_EQ(r.last, 10u);
  ASSERT_EQ(r.changes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.changes[i].sequence, 8 + i);
    EXPECT_EQ(r.changes[i].key, "a-long-key-that-needs-its-own-buffer-" + std::to_string(7 + i));
  }
  store->feed().ReadAfter(10, 8, r);
  EXPECT_TRUE(r.changes.empty());

  auto small = MakeStore(4 * sizeof(Change));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Put(*small, "k" + std::to_string(i)).ok());
  small->feed().ReadAfter(98, 8, r);
  ASSERT_EQ(r.changes.size(), 2u);
  small->feed().ReadAfter(0, 8, r);  // gone: behind, and no stale changes left
  EXPECT_TRUE(r.behind);
  EXPECT_TRUE(r.changes.empty());
  small->feed().ReadAfter(r.first_kept - 1, 8, r);
  EXPECT_FALSE(r.behind);
  EXPECT_FALSE(r.changes.empty());
}

// Snapshot while two writers put and remove. Plain writers churn the keys the
// snapshot is copying; `fresh` writers leave them alone and keep creating (and
// removing some of) new keys, so the shards' tables rehash while they are being
// copied and every old key must still come out exactly once.
void CheckSnapshotUnderWriters(uint32_t shards, bool fresh) {
  auto store = MakeStore(256 << 20, nullptr, shards);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(Put(*store, "k" + std::to_string(i)).ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(w + 1);
      for (uint64_t n = 0; !stop.load(); ++n) {
        // At most 30000 new keys per writer: the pool never fills.
        const std::string key = fresh ? "n" + std::to_string(w) + "-" + std::to_string(n % 30000)
                                      : "k" + std::to_string(rng() % 3000);
        if (rng() % 3 == 0) {
          (void)store->Remove({}, {"t", key});
        } else {
          (void)Put(*store, key, /*upsert=*/true);
        }
      }
    });
  }
  // The writers are running before the snapshot starts, and go on until the
  // feed holds changes after its watermark.
  while (store->feed().last_sequence() < 3000) std::this_thread::yield();
  using Replica = std::pair<std::string, Medium>;
  std::map<Replica, uint64_t> view;  // -> generation
  size_t pages = 0;
  uint64_t newest_in_pages = 0;
  const uint64_t watermark =
      store->admin().Snapshot(100, [&](std::span<const SnapshotRecord> page) {
        ++pages;
        EXPECT_LE(page.size(), 100u);
        for (const SnapshotRecord& r : page) {
          newest_in_pages = std::max(newest_in_pages, r.sequence);
          EXPECT_TRUE(view.emplace(Replica{r.key, r.medium}, r.generation).second) << r.key;
        }
      });
  while (store->feed().last_sequence() < watermark + 1000) std::this_thread::yield();
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_GT(pages, 1u);
  if (fresh) {
    for (int i = 0; i < 2000; ++i)
      EXPECT_EQ(view.count({"k" + std::to_string(i), Medium::kDram}), 1u);
  }
  EXPECT_LE(newest_in_pages, watermark);  // what came after is the feed's
  // Apply everything after the watermark.
  int duplicates = 0;
  for (uint64_t after = watermark;;) {
    FeedRead r = store->feed().ReadAfter(after, 4096);
    ASSERT_FALSE(r.behind);
    if (r.changes.empty()) break;
    for (const Change& c : r.changes) {
      EXPECT_EQ(c.sequence, after + 1);  // contiguous
      after = c.sequence;
      const Replica id{c.key, c.medium};
      if (c.kind == ChangeKind::kStored) {
        duplicates += view.count(id) != 0 && view[id] == c.generation;
        view[id] = c.generation;
      } else if (c.kind == ChangeKind::kRemoved) {
        auto it = view.find(id);
        if (it != view.end() && it->second == c.generation) view.erase(it);
      }
    }
  }
  std::map<Replica, uint64_t> actual;
  store->admin().ForEachReadable([&](const ReplicaEvent& e) {
    actual[{std::string(e.key), e.medium}] = e.generation;
  });
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(view, actual);
}

TEST(ChangeFeed, SnapshotPlusLaterChangesIsTheStoreWithNoGapAndNoDuplicate) {
  CheckSnapshotUnderWriters(64, /*fresh=*/false);
}

TEST(ChangeFeed, SnapshotOfAShardThatRehashesWhileItIsCopiedStaysExact) {
  CheckSnapshotUnderWriters(1, /*fresh=*/true);
}

TEST(ChangeFeed, ChangesAndSnapshotsCarryTheObjectsNamespace) {
  auto store = MakeStore(64 << 10);
  const std::string ns = "tierkv:v1:" + std::string(64, 'a');
  auto g = store->Alloc(Caller(1, 0, ns), {"t", "x"}, 64, {});
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(store->Commit(Caller(1, 0, ns), g->alloc_id).ok());
  ASSERT_TRUE(Put(*store, "plain").ok());
  FeedRead r = store->feed().ReadAfter(0, 10);
  ASSERT_EQ(r.changes.size(), 2u);
  EXPECT_EQ(r.changes[0].name_space, ns);
  EXPECT_EQ(r.changes[1].name_space, "");
  std::map<std::string, std::string> seen;
  store->admin().Snapshot(10, [&](std::span<const SnapshotRecord> page) {
    for (const SnapshotRecord& rec : page) seen[rec.key] = rec.name_space;
  });
  EXPECT_EQ(seen["x"], ns);
  EXPECT_EQ(seen["plain"], "");
}

}  // namespace
}  // namespace tierkv
