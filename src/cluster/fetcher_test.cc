// The remote read path in one process: an owner (store, grants, data channel
// on loopback) and a requester (store, a global index the test writes, the
// fetcher). The owner's Authorize and Release calls go to its GrantTable in
// the same process (OwnerCalls, the fetcher's GrantClient seam), so the
// owner can be made not to answer; one test makes them over real peer gRPC.
// Covers a stale entry retried once the index moved, one that is not, a key
// in no view, a large value read in ranges, and an owner that goes silent.
#include "cluster/fetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "cluster/grant_client.h"
#include "cluster/grant_service.h"
#include "cluster/grants.h"
#include "cluster/peer_server.h"
#include "media/checksum.h"
#include "peer.grpc.pb.h"
#include "transfer/data_server.h"
#include "transfer/tcp_transport.h"
#include "wait_for.h"

namespace tierkv {
namespace {

std::unique_ptr<Store> MakeStore() {
  auto pool = DramPool::Create(32 << 20);
  EXPECT_TRUE(pool.ok());
  auto store = Store::Create({}, std::move(*pool));
  EXPECT_TRUE(store.ok());
  return std::move(*store);
}

// Puts (or replaces) `key` on `s`; returns its generation.
uint64_t Put(Store& s, const std::string& key, const std::string& value) {
  const Caller c(1, 0);
  PutOptions o;
  o.upsert = true;
  Result<AllocGrant> g = s.Alloc(c, {"t", key}, value.size(), o);
  EXPECT_TRUE(g.ok());
  std::memcpy(g->data, value.data(), value.size());
  EXPECT_TRUE(s.Commit(c, g->alloc_id).ok());
  Result<PinGrant> p = s.pins().Pin(7, {"t", key}, 0, 0);
  EXPECT_TRUE(p.ok());
  const uint64_t gen = p->generation;
  (void)s.pins().Unpin(7, p->pin_id);
  return gen;
}

InventoryDelta Stored(const std::string& key, uint64_t gen, uint64_t size) {
  InventoryDelta d;
  d.tenant = "t";
  d.key = key;
  d.size = size;
  d.generation = gen;
  return d;
}

// The owner's peer calls, served by its GrantTable in this process. While
// `silent`, a call gets no answer (UNAVAILABLE) and reaches nothing.
class OwnerCalls final : public GrantClient {
 public:
  explicit OwnerCalls(GrantTable* grants) : grants_(grants) {}
  Status Authorize(const std::string&, const peer::AuthorizeRequest& req,
                   peer::AuthorizeResponse* resp, int64_t) override {
    authorizes.fetch_add(1);
    if (silent.load()) return Status(Code::kUnavailable, "no answer");
    return ServeAuthorize(*grants_, req, resp);
  }
  Status Release(const std::string&, const peer::ReleaseRequest& req, int64_t) override {
    if (silent.load()) return Status(Code::kUnavailable, "no answer");
    released.fetch_add(grants_->Release(req.requester_uuid(), req.ticket()) ? 1 : 0);
    return Status::Ok();
  }
  void Forget(const std::string&) override {}

  std::atomic<bool> silent{false};
  std::atomic<uint64_t> authorizes{0}, released{0};

 private:
  GrantTable* const grants_;
};

// Every case runs with authorizations over the data channel and over the
// peer calls.
class FetcherTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    owner_ = MakeStore();
    local_ = MakeStore();
    GrantOptions go;
    go.runtime_uuid = "owner-uuid";
    go.budget_bytes = 32 << 20;
    go.admitting = [this] {
      if (on_authorize_) on_authorize_();
      return true;
    };
    grants_ = std::make_unique<GrantTable>(go, owner_.get());
    calls_ = std::make_unique<OwnerCalls>(grants_.get());
    transfer::DataServerOptions dso;
    dso.listen = "127.0.0.1:0";
    data_grants_ = std::make_unique<DataChannelGrants>(grants_.get());
    data_ = std::make_unique<transfer::DataServer>(dso, data_grants_.get());
    ASSERT_TRUE(data_->Start().ok());
    auto t = transfer::TcpTransport::Create({});
    ASSERT_TRUE(t.ok());
    transport_ = std::move(*t);
    index_.SetExpected({{"owner", {"owner-uuid", 1}}});
    FetcherOptions fo;
    fo.node_id = "me";
    fo.runtime_uuid = "me-uuid";
    fo.authorize_over_data = GetParam();
    MakeFetcher(fo, calls_.get());
  }
  void TearDown() override {
    fetcher_.reset();
    data_->Stop();
    if (peer_) peer_->Stop(0);
  }
  void MakeFetcher(const FetcherOptions& fo, GrantClient* calls) {
    fetcher_.reset();
    fetcher_ = std::make_unique<RemoteFetcher>(fo, local_.get(), &index_, transport_.get(), nullptr,
                                               calls);
    Announce();
  }

  // The owner as a live member, at its current peer and data ports.
  void Announce() {
    MemberView m;
    m.node_id = "owner";
    m.runtime_uuid = "owner-uuid";
    m.endpoint = "127.0.0.1:" + std::to_string(peer_ ? peer_->port() : 1);
    m.data_endpoint = "127.0.0.1:" + std::to_string(data_->port());
    fetcher_->SetMembers({m});
  }

  // The requester's view of the owner: exactly `deltas`, complete.
  void View(const std::vector<InventoryDelta>& deltas) {
    auto v = std::make_unique<OwnerView>();
    for (const InventoryDelta& d : deltas) v->Apply(d);
    index_.BeginStaging();
    ASSERT_TRUE(index_.ReserveStaging(v->bytes()));
    index_.Install("owner", "owner-uuid", std::move(v), ++watermark_, 0);
  }

  Status FetchOne(const std::string& key) {
    const std::string_view k[] = {key};
    return fetcher_->Fetch("t", k).front();
  }

  std::string Local(const std::string& key) {
    Result<LeaseGrant> g = local_->Lease(Caller(2, 0), {"t", key});
    if (!g.ok()) return "";
    std::string v(reinterpret_cast<const char*>(g->data), g->size);
    (void)local_->Release(Caller(2, 0), g->lease_id);
    return v;
  }

  std::unique_ptr<Store> owner_, local_;
  std::unique_ptr<GrantTable> grants_;
  std::unique_ptr<DataChannelGrants> data_grants_;
  std::unique_ptr<OwnerCalls> calls_;
  std::unique_ptr<PeerServer> peer_;  // only where the calls go over real gRPC
  std::unique_ptr<transfer::DataServer> data_;
  std::unique_ptr<transfer::TcpTransport> transport_;
  GlobalIndex index_{64 << 20};
  std::unique_ptr<RemoteFetcher> fetcher_;
  std::function<void()> on_authorize_;
  uint64_t watermark_ = 0;
};

TEST_P(FetcherTest, AFetchStoresTheOwnersBytesLocally) {
  const uint64_t g = Put(*owner_, "k", "owner's bytes");
  View({Stored("k", g, 13)});
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "owner's bytes");
  EXPECT_EQ(fetcher_->Stats().objects, 1u);
  EXPECT_EQ(data_->Stats().authorizations, GetParam() ? 1u : 0u);  // the path it took
  EXPECT_EQ(data_->Stats().reads, 1u);
  if (GetParam()) {
    // The READ went right behind the AUTHORIZE, on the same connection.
    EXPECT_EQ(fetcher_->Stats().early_reads, 1u);
    EXPECT_EQ(data_->Stats().connections_total, 1u);
  } else {
    EXPECT_EQ(fetcher_->Stats().early_reads, 0u);
  }
  // The checksum verified on the way in is kept with the local value, so a
  // READ of it from here is answered without hashing it again.
  Result<PinGrant> pin = local_->pins().Pin(77, {"t", "k"}, 0, 0);
  ASSERT_TRUE(pin.ok());
  ASSERT_NE(pin->digests, nullptr);
  EXPECT_EQ(pin->digests->Find(0, 13, 13), ValueChecksum("owner's bytes", 13));
  (void)local_->pins().Unpin(77, pin->pin_id);
  Status none = FetchOne("nowhere");
  EXPECT_EQ(none.code(), Code::kNotFound);
  EXPECT_NE(none.message().find("not held by any other manager"), std::string::npos);
}

TEST_P(FetcherTest, ALargeValueMovesAsSeveralRangesAtOnceEveryByteInPlace) {
  // 12 MiB + 5 bytes: three ranges of at least 4 MiB (the default allows four
  // READs at once), the last one shorter and not page-sized.
  std::string value((12 << 20) + 5, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>((i * 131) ^ (i >> 12));
  const uint64_t g = Put(*owner_, "big", value);
  View({Stored("big", g, value.size())});
  ASSERT_TRUE(FetchOne("big").ok());
  EXPECT_EQ(data_->Stats().reads, 3u);
  EXPECT_EQ(data_->Stats().bytes_out, value.size());
  EXPECT_TRUE(Local("big") == value);
}

// The owner refuses the generation the index named; the index catches up
// meanwhile. The same owner is asked again for the value it holds now.
TEST_P(FetcherTest, AStaleEntryIsAskedOfTheSameOwnerAgainOnceTheIndexHasTheNewValue) {
  const uint64_t g1 = Put(*owner_, "k", "first");
  const uint64_t g2 = Put(*owner_, "k", "second!");
  View({Stored("k", g1, 5)});
  // The index catches up while the first authorization is under way.
  std::atomic<bool> caught_up{false};
  on_authorize_ = [&] {
    if (caught_up.exchange(true)) return;
    EXPECT_TRUE(index_.ApplyDeltas("owner", watermark_ + 1, watermark_ + 1, {Stored("k", g2, 7)}));
  };
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "second!");
  const FetchStats s = fetcher_->Stats();
  EXPECT_EQ(s.stale_retries, 1u);
  EXPECT_EQ(s.miss_refused, 1u);
  EXPECT_EQ(local_->admin().Stats().pending_allocs, 0u);
  if (GetParam()) {
    // The READ behind the refused authorization was refused (nothing read)
    // and its allocation dropped; the second try, for any generation, reads
    // after its answer (the size is the owner's to say).
    EXPECT_EQ(s.early_reads, 0u);
    EXPECT_EQ(data_->Stats().refusals, 1u);
    EXPECT_EQ(data_->Stats().reads, 1u);
  }
}

// The index has not caught up with an upsert on the owner: the key is asked
// of the same owner again for whatever value it holds (generation 0), and
// that value arrives; a key being upserted never misses for a lagging index.
TEST_P(FetcherTest, AStaleEntryTheIndexStillHoldsIsAskedOfItsOwnerForItsValueNow) {
  const uint64_t g1 = Put(*owner_, "k", "first");
  Put(*owner_, "k", "second!");
  View({Stored("k", g1, 5)});
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "second!");
  const FetchStats s = fetcher_->Stats();
  EXPECT_EQ(s.stale_retries, 1u);
  EXPECT_EQ(s.miss_refused, 1u);
  EXPECT_EQ(local_->admin().Stats().pending_allocs, 0u);
}

// Removed on the owner, still in the index: one more try for whatever the
// owner holds, then a bounded miss naming the refusal; nothing stays here.
TEST_P(FetcherTest, AKeyRemovedOnItsOwnerThatTheIndexStillHoldsIsABoundedMiss) {
  const uint64_t g1 = Put(*owner_, "k", "first");
  ASSERT_TRUE(owner_->Remove(Caller(1, 0), {"t", "k"}).ok());
  View({Stored("k", g1, 5)});
  Status st = FetchOne("k");
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("refused"), std::string::npos) << st.ToString();
  EXPECT_EQ(fetcher_->Stats().stale_retries, 1u);
  EXPECT_EQ(Local("k"), "");
  EXPECT_EQ(local_->admin().Stats().pending_allocs, 0u);
  EXPECT_EQ(local_->admin().Stats().objects, 0u);
}

// An owner whose data channel does not authorize (NOT_SUPPORTED) is asked
// over its peer calls instead, and the value still arrives.
TEST_P(FetcherTest, AnOwnerWhoseDataChannelDoesNotAuthorizeIsAskedOverItsPeerCalls) {
  data_->Stop();
  transfer::DataServerOptions dso;
  dso.listen = "127.0.0.1:0";
  data_ = std::make_unique<transfer::DataServer>(dso, grants_.get());  // READs only
  ASSERT_TRUE(data_->Start().ok());
  Announce();  // the owner's new data endpoint
  const uint64_t g = Put(*owner_, "k", "over grpc");
  View({Stored("k", g, 9)});
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "over grpc");
  EXPECT_EQ(data_->Stats().authorizations, 0u);
  EXPECT_EQ(grants_->Stats().authorizations, 1u);
  EXPECT_EQ(calls_->authorizes.load(), 1u);
}

// An owner that stops answering its peer calls: the fetch is a bounded miss
// that names it, counted as an authorization without an answer; once it
// answers again, the next fetch works and the grant it made is released.
TEST_P(FetcherTest, AnOwnerThatDoesNotAnswerIsABoundedMissAndItsGrantsAreStillReleased) {
  FetcherOptions fo;
  fo.node_id = "me";
  fo.runtime_uuid = "me-uuid";
  fo.authorize_over_data = false;  // the owner answers only through its peer calls
  fo.authorize_timeout_ms = 200;
  MakeFetcher(fo, calls_.get());
  const uint64_t g = Put(*owner_, "k", "silent owner");
  View({Stored("k", g, 12)});
  calls_->silent = true;
  const Status miss = FetchOne("k");
  EXPECT_EQ(miss.code(), Code::kNotFound);
  EXPECT_NE(miss.message().find("owner"), std::string::npos) << miss.ToString();
  EXPECT_EQ(Local("k"), "");
  EXPECT_EQ(fetcher_->Stats().authorize_failures, 1u);
  EXPECT_EQ(grants_->Stats().authorizations, 0u);  // nothing reached the owner
  {
    // As /metrics shows it: each family once, the miss under its reason.
    MetricCapture m;
    fetcher_->ReportMetrics(m);
    EXPECT_EQ(m.Value("tierkv_remote_authorize_calls_total{result=\"no_answer\"}"), 1);
    EXPECT_EQ(m.Value("tierkv_remote_authorize_calls_total{result=\"answered\"}"), 0);
    const FetchStats f = fetcher_->Stats();
    const std::pair<const char*, uint64_t> misses[] = {
        {"not_indexed", f.miss_not_indexed}, {"refused", f.miss_refused},
        {"budget", f.miss_budget},           {"read_failed", f.miss_read},
        {"local_space", f.miss_local_space}, {"grant_slots", f.miss_slots}};
    uint64_t total = 0;
    for (const auto& [reason, count] : misses) {
      EXPECT_EQ(m.Value("tierkv_remote_fetch_misses_total{reason=\"" + std::string(reason) + "\"}"),
                double(count))
          << reason;
      total += count;
    }
    EXPECT_EQ(total, 1u);  // the one miss, under one reason
    EXPECT_EQ(m.Value("tierkv_remote_copies"), 0);
    EXPECT_EQ(m.Families("tierkv_remote_fetch_misses_total"), 1);
    EXPECT_EQ(m.Families("tierkv_remote_copies_dropped_total"), 1);
  }

  calls_->silent = false;
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "silent owner");
  fetcher_.reset();  // sends the releases still queued
  EXPECT_EQ(calls_->released.load(), 1u);
  EXPECT_EQ(grants_->Stats().sessions, 0u);
}

// A release the owner does not answer is counted and left to the owner's
// grant deadline.
TEST_P(FetcherTest, AReleaseWithoutAnAnswerIsCountedAndLeftToTheOwnersDeadline) {
  FetcherOptions fo;
  fo.node_id = "me";
  fo.runtime_uuid = "me-uuid";
  fo.authorize_over_data = true;  // the authorization itself needs no peer call
  MakeFetcher(fo, calls_.get());
  const uint64_t g = Put(*owner_, "k", "bytes");
  View({Stored("k", g, 5)});
  calls_->silent = true;  // from here the owner answers only the data channel
  ASSERT_TRUE(FetchOne("k").ok());
  // The release goes alone once its linger passed, and gets no answer.
  ASSERT_TRUE(testing::WaitFor([&] { return fetcher_->Stats().release_failures == 1; }));
  EXPECT_EQ(fetcher_->Stats().releases, 0u);
  EXPECT_EQ(calls_->released.load(), 0u);
  EXPECT_EQ(grants_->Stats().sessions, 1u);
}

// The real peer gRPC: the owner's peer service on loopback, the fetcher's own
// gRPC client.
TEST_P(FetcherTest, AuthorizeAndReleaseGoOverPeerGrpc) {
  peer_ = std::make_unique<PeerServer>(
      [] { return PeerIdentity{"owner", "owner-uuid", 1, 0, "", ""}; });
  peer_->SetGrants(grants_.get());
  ASSERT_TRUE(peer_->Start("127.0.0.1:0").ok());
  FetcherOptions fo;
  fo.node_id = "me";
  fo.runtime_uuid = "me-uuid";
  fo.authorize_over_data = false;
  MakeFetcher(fo, nullptr);
  const uint64_t g = Put(*owner_, "k", "over grpc");
  View({Stored("k", g, 9)});
  ASSERT_TRUE(FetchOne("k").ok());
  EXPECT_EQ(Local("k"), "over grpc");
  EXPECT_EQ(calls_->authorizes.load(), 0u);
  EXPECT_EQ(grants_->Stats().authorizations, 1u);
  fetcher_.reset();
  EXPECT_EQ(grants_->Stats().sessions, 0u);  // released over gRPC
}

INSTANTIATE_TEST_SUITE_P(Authorize, FetcherTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "OverTheDataChannel" : "OverPeerCalls";
                         });

}  // namespace
}  // namespace tierkv
