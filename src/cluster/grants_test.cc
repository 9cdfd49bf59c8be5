// Source grants over a real store, and the data channel in front of them on
// loopback: budget, generations, deadlines, departed requesters, READ checks,
// memory that stays put while a READ still holds it, and a reader that
// refuses bytes whose checksum does not match.
#include "cluster/grants.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <cstring>
#include <thread>
#include <tuple>

#include "cluster/grant_service.h"
#include "media/mem_block_file.h"
#include "peer.pb.h"
#include "transfer/data_server.h"
#include "transfer/tcp_transport.h"
#include "wait_for.h"

namespace tierkv {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Writes `value` over a byte of an owner's pinned value: corruption, for the
// tests that check a reader catches it. The data server may have read those
// bytes for an earlier READ on its own thread; the socket orders that read
// before this write, which ThreadSanitizer cannot see, so its builds ignore
// the write (a dynamic annotation its runtime provides).
#if defined(__SANITIZE_THREAD__)  // GCC
#define TIERKV_TSAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(thread_sanitizer)
#define TIERKV_TSAN 1
#endif
#endif
#ifdef TIERKV_TSAN
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
void Scribble(const uint8_t* at, uint8_t value) {
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  *const_cast<uint8_t*>(at) = value;
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
}
#else
void Scribble(const uint8_t* at, uint8_t value) { *const_cast<uint8_t*>(at) = value; }
#endif

class GrantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.clock = &clock_;
    auto pool = DramPool::Create(32 * kMiB);
    ASSERT_TRUE(pool.ok());
    auto store = Store::Create(o, std::move(*pool));
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }

  GrantTable& Table(uint64_t budget = 4 * kMiB, int64_t timeout_ms = 1000,
                    size_t per_requester = 256, const LiveMembers* members = nullptr) {
    GrantOptions g;
    g.members = members;
    g.runtime_uuid = "owner-uuid";
    g.budget_bytes = budget;
    g.grant_timeout_ms = timeout_ms;
    g.max_sessions = 4;
    g.max_per_requester = per_requester;
    g.budget_wait_ms = 50;
    table_ = std::make_unique<GrantTable>(g, store_.get(), &clock_);
    return *table_;
  }

  // Stores `key` = `size` bytes of `fill`; returns its generation.
  uint64_t Put(const std::string& key, uint64_t size, char fill, bool upsert = false) {
    const Caller c(1, 0);
    PutOptions po;
    po.upsert = upsert;
    Result<AllocGrant> g = store_->Alloc(c, {"t", key}, size, po);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    std::memset(g->data, fill, size);
    EXPECT_TRUE(store_->Commit(c, g->alloc_id).ok());
    Result<PinGrant> peek = store_->pins().Pin(99, {"t", key}, 0, 0);
    EXPECT_TRUE(peek.ok());
    const uint64_t gen = peek->generation;
    EXPECT_TRUE(store_->pins().Unpin(99, peek->pin_id).ok());
    return gen;
  }

  Result<std::vector<GrantAnswer>> Ask(uint64_t ticket, std::vector<GrantRequestItem> items,
                                       const std::string& uuid = "req-1", bool may_block = true) {
    return table_->Authorize("req", uuid, "owner-uuid", ticket, items, may_block);
  }

  // req-1's encoded authorization of one item of tenant "t" under `ticket`,
  // carrying the releases of `release`.
  static std::string EncodedAuthorize(uint64_t ticket, const std::string& key, uint64_t generation,
                                      const std::vector<uint64_t>& release = {}) {
    peer::AuthorizeRequest req;
    req.set_requester_node("req");
    req.set_requester_uuid("req-1");
    req.set_expect_owner_uuid("owner-uuid");
    req.set_ticket(ticket);
    peer::GrantItem* item = req.add_items();
    item->set_tenant("t");
    item->set_key(key);
    item->set_generation(generation);
    for (uint64_t r : release) req.add_release_tickets(r);
    return req.SerializeAsString();
  }

  // Gives the store an SSD tier over `bytes` of memory.
  void AttachSsd(uint64_t bytes) {
    std::vector<SsdBlob> recovered;
    SsdRecoveryStats stats;
    auto tier =
        SsdTier::Open(std::make_unique<MemBlockFile>(std::make_shared<std::string>(bytes, '\0')),
                      &recovered, &stats);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    ASSERT_TRUE(store_->AttachSsd(std::move(*tier), std::move(recovered), stats).ok());
  }

  // A data channel on loopback in front of `t`, and a reader of it.
  struct Channel {
    std::unique_ptr<transfer::DataServer> server;
    std::string ep;
    std::unique_ptr<transfer::TcpTransport> client;
  };
  static Channel Serve(transfer::GrantSource& t, transfer::DataServerOptions o = {}) {
    Channel c;
    o.listen = "127.0.0.1:0";
    c.server = std::make_unique<transfer::DataServer>(o, &t);
    EXPECT_TRUE(c.server->Start().ok());
    c.ep = "127.0.0.1:" + std::to_string(c.server->port());
    auto made = transfer::TcpTransport::Create({});
    EXPECT_TRUE(made.ok());
    if (made.ok()) c.client = std::move(*made);
    return c;
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<GrantTable> table_;
};

TEST_F(GrantsTest, GrantsTheExactGenerationAndRefusesAnyOther) {
  GrantTable& t = Table();
  const uint64_t g1 = Put("k", 1000, 'a');
  const uint64_t g2 = Put("k", 1000, 'b', /*upsert=*/true);
  auto stale = Ask(1, {{"t", "k", g1}});
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ((*stale)[0].status.code(), Code::kNotFound);
  EXPECT_FALSE(t.Release("req-1", 1));  // nothing granted: no grant kept
  auto fresh = Ask(2, {{"t", "k", g2}, {"t", "absent", 5}});
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE((*fresh)[0].status.ok());
  EXPECT_EQ((*fresh)[0].size, 1000u);
  EXPECT_EQ((*fresh)[1].status.code(), Code::kNotFound);
  Result<transfer::GrantSpan> span = t.Open(2, 0, g2);
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span->data[0], 'b');
  EXPECT_EQ(t.Open(2, 0, g1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(t.Open(2, 1, 5).status().code(), Code::kNotFound);   // refused item
  EXPECT_EQ(t.Open(3, 0, g2).status().code(), Code::kNotFound);  // no such ticket
  EXPECT_EQ(t.Stats().refused_stale, 2u);
  // Another requester cannot release it; its own requester can, once.
  EXPECT_FALSE(t.Release("req-2", 2));
  EXPECT_TRUE(t.Release("req-1", 2));
  EXPECT_FALSE(t.Release("req-1", 2));
}

TEST_F(GrantsTest, WholeCallRefusals) {
  GrantTable& t = Table();
  const uint64_t g = Put("k", 100, 'a');
  EXPECT_EQ(t.Authorize("req", "req-1", "an-older-runtime", 1,
                        std::vector<GrantRequestItem>{{"t", "k", g}})
                .status()
                .code(),
            Code::kNotFound);
  EXPECT_EQ(Ask(0, {{"t", "k", g}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Ask(1, {}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Ask(1, {{"t", "", g}}).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(Ask(1, {{"t", "k", g}}).ok());
  EXPECT_EQ(Ask(1, {{"t", "k", g}}).status().code(), Code::kInvalidArgument);  // live ticket
  for (uint64_t tk = 2; tk <= 4; ++tk) ASSERT_TRUE(Ask(tk, {{"t", "k", g}}).ok());
  EXPECT_EQ(Ask(5, {{"t", "k", g}}).status().code(), Code::kNoSpace);  // max_sessions
  EXPECT_EQ(t.Stats().refused_sessions, 1u);
}

// With a member list, a requester whose node id and runtime UUID are not a
// live member's is refused whole, before it takes a slot or pins anything.
TEST_F(GrantsTest, OnlyLiveMembersAreGranted) {
  LiveMembers members;
  MemberView req;
  req.node_id = "req";
  req.runtime_uuid = "req-1";
  members.Set({req});
  GrantTable& t = Table(4 * kMiB, 1000, 256, &members);
  const uint64_t g = Put("k", 100, 'a');
  for (uint64_t tk = 1; tk <= 10; ++tk) {  // more than max_sessions (4)
    Result<std::vector<GrantAnswer>> r = Ask(tk, {{"t", "k", g}}, "made-up-" + std::to_string(tk));
    ASSERT_EQ(r.status().code(), Code::kNotFound) << tk;
    EXPECT_NE(r.status().message().find("not a live member"), std::string::npos);
  }
  EXPECT_EQ(t.Stats().sessions, 0u);
  EXPECT_EQ(t.Stats().refused_other, 10u);
  ASSERT_TRUE(Ask(11, {{"t", "k", g}}).ok());  // the member itself
  members.Set({});                             // it left
  EXPECT_EQ(Ask(12, {{"t", "k", g}}).status().code(), Code::kNotFound);
}

// A new incarnation of the owner (a rejoin after a fence): every grant of the
// old one ends, and authorizations must name the new runtime UUID.
TEST_F(GrantsTest, ANewIncarnationEndsEveryOldGrant) {
  GrantTable& t = Table();
  const uint64_t g = Put("k", 100, 'a');
  ASSERT_TRUE(Ask(1, {{"t", "k", g}}).ok());
  ASSERT_EQ(t.Stats().sessions, 1u);
  t.SetRuntimeUuid("owner-uuid-2");
  EXPECT_EQ(t.Stats().sessions, 0u);
  EXPECT_EQ(t.Stats().reserved_bytes, 0u);
  EXPECT_EQ(Ask(2, {{"t", "k", g}}).status().code(), Code::kNotFound);  // names the old one
  EXPECT_TRUE(
      t.Authorize("req", "req-1", "owner-uuid-2", 3, std::vector<GrantRequestItem>{{"t", "k", g}})
          .ok());
}

// One requester holds at most max_per_requester grants; others still get
// theirs. Refused calls (a live ticket, too many) do not make the table
// forget what the requester holds: it still waits for its own releases when
// the budget is short.
TEST_F(GrantsTest, ARequesterHoldsAtMostItsShareAndRefusalsKeepItsCount) {
  GrantTable& t = Table(/*budget=*/3 * kMiB, /*timeout_ms=*/1000, /*per_requester=*/2);
  const uint64_t a = Put("a", 2 * kMiB, 'a');
  const uint64_t b = Put("b", 2 * kMiB, 'b');
  const uint64_t c = Put("c", 1000, 'c');
  ASSERT_TRUE(Ask(1, {{"t", "a", a}}).ok());
  ASSERT_TRUE(Ask(2, {{"t", "c", c}}).ok());
  const Result<std::vector<GrantAnswer>> third = Ask(3, {{"t", "c", c}});
  EXPECT_EQ(third.status().code(), Code::kNoSpace);
  EXPECT_NE(third.status().message().find("already holds 2"), std::string::npos)
      << third.status().ToString();
  EXPECT_EQ(t.Stats().refused_sessions, 1u);
  auto other = Ask(11, {{"t", "c", c}}, "req-2");  // another requester is served
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)[0].status.ok());
  for (int i = 0; i < 3; ++i) {  // refused: a live ticket
    EXPECT_EQ(Ask(1, {{"t", "c", c}}).status().code(), Code::kInvalidArgument);
  }
  EXPECT_TRUE(t.Release("req-1", 2));
  // req-1 still holds grant 1 (2 MiB of the 3 MiB budget): b does not fit,
  // and req-1 waits for its own release before it is refused.
  auto same = Ask(4, {{"t", "b", b}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[0].status.code(), Code::kNoSpace);
  EXPECT_EQ(t.Stats().budget_waits, 1u);
}

TEST_F(GrantsTest, TheBudgetChargesWholeAllocationsOncePerGrant) {
  GrantTable& t = Table(/*budget=*/3 * kMiB);
  const uint64_t a = Put("a", 2 * kMiB, 'a');
  const uint64_t b = Put("b", 2 * kMiB, 'b');
  // The same value twice in one grant is charged once.
  auto first = Ask(1, {{"t", "a", a}, {"t", "a", a}});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)[0].status.ok() && (*first)[1].status.ok());
  const uint64_t charged = t.Stats().reserved_bytes;
  EXPECT_GE(charged, 2 * kMiB);
  EXPECT_LT(charged, 3 * kMiB);
  // Another requester's grant does not fit: refused, not waited for.
  auto other = Ask(2, {{"t", "b", b}}, "req-2");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0].status.code(), Code::kNoSpace);
  EXPECT_EQ(t.Stats().budget_waits, 0u);
  // The same requester waits (briefly) for its own grant's release, then retries.
  auto same = Ask(3, {{"t", "b", b}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[0].status.code(), Code::kNoSpace);
  EXPECT_EQ(t.Stats().budget_waits, 1u);
  EXPECT_TRUE(t.Release("req-1", 1));
  EXPECT_EQ(t.Stats().reserved_bytes, 0u);
  auto now = Ask(4, {{"t", "b", b}}, "req-2");
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE((*now)[0].status.ok());
}

TEST_F(GrantsTest, AnUnreleasedGrantEndsAtItsDeadlineAndADepartedRequestersAtOnce) {
  GrantTable& t = Table(4 * kMiB, /*timeout_ms=*/1000);
  const uint64_t g = Put("k", kMiB, 'a');
  ASSERT_TRUE(Ask(1, {{"t", "k", g}}).ok());              // its release is lost
  ASSERT_TRUE(Ask(2, {{"t", "k", g}}, "req-gone").ok());  // its requester leaves
  EXPECT_EQ(t.ReleaseDeparted({"req-1"}), 1u);
  EXPECT_EQ(t.Open(2, 0, g).status().code(), Code::kNotFound);
  clock_.AdvanceMillis(999);
  EXPECT_EQ(t.ExpireDue(), 0u);
  clock_.AdvanceMillis(1);
  EXPECT_EQ(t.ExpireDue(), 1u);
  EXPECT_EQ(t.Open(1, 0, g).status().code(), Code::kNotFound);
  const GrantStats s = t.Stats();
  EXPECT_EQ(s.sessions, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.departed, 1u);
}

TEST_F(GrantsTest, AReadInProgressKeepsTheBytesEvenWhenTheKeyIsReplaced) {
  GrantTable& t = Table();
  const uint64_t g = Put("k", 4096, 'a');
  ASSERT_TRUE(Ask(1, {{"t", "k", g}}).ok());
  Result<transfer::GrantSpan> span = t.Open(1, 0, g);
  ASSERT_TRUE(span.ok());
  EXPECT_TRUE(t.Release("req-1", 1));  // released while "sending"
  ASSERT_TRUE(store_->Remove(Caller(1, 0), {"t", "k"}).ok());
  Put("k", 4096, 'z');  // the freed range would be the natural place for it
  for (uint64_t i = 0; i < 4096; ++i) ASSERT_EQ(span->data[i], 'a') << i;
  span = Status(Code::kInternal, "dropped");  // the READ ends: the pin goes now
  EXPECT_EQ(t.Stats().reserved_bytes, 0u);
}

// The data channel in front of a grant table, on loopback.
TEST_F(GrantsTest, TheDataChannelServesGrantedRangesOnly) {
  GrantTable& t = Table();
  const uint64_t g = Put("k", 3 * kMiB + 17, 'q');
  Channel ch = Serve(t);
  ASSERT_TRUE(ch.client);
  transfer::DataServer& server = *ch.server;
  const std::string& ep = ch.ep;
  transfer::TcpTransport& client = *ch.client;
  ASSERT_TRUE(Ask(7, {{"t", "k", g}}).ok());
  std::vector<uint8_t> dest(3 * kMiB + 17);
  ASSERT_TRUE(client.Read(ep, {7, 0, g, 0, dest.size()}, dest.data()).ok());
  EXPECT_TRUE(std::all_of(dest.begin(), dest.end(), [](uint8_t c) { return c == 'q'; }));
  // A slice; a range past the end; a wrong generation; an unknown ticket. The
  // connection stays usable after each refusal.
  ASSERT_TRUE(client.Read(ep, {7, 0, g, 100, 10}, dest.data()).ok());
  EXPECT_EQ(client.Read(ep, {7, 0, g, dest.size(), 1}, dest.data()).code(), Code::kInvalidArgument);
  EXPECT_EQ(client.Read(ep, {7, 0, g + 1, 0, 1}, dest.data()).code(), Code::kInvalidArgument);
  EXPECT_EQ(client.Read(ep, {8, 0, g, 0, 1}, dest.data()).code(), Code::kNotFound);
  ASSERT_TRUE(t.Release("req-1", 7));
  EXPECT_EQ(client.Read(ep, {7, 0, g, 0, 1}, dest.data()).code(), Code::kNotFound);
  // Garbage gets an error and a closed connection; the server keeps serving.
  {
    asio::io_context io;
    asio::ip::tcp::socket raw(io);
    raw.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port())});
    const std::string junk(transfer::kRequestBytes, 'x');
    asio::write(raw, asio::buffer(junk));
    uint8_t head[transfer::kResponseBytes];
    asio::read(raw, asio::buffer(head));
    transfer::ResponseHead h;
    ASSERT_TRUE(transfer::DecodeResponse(head, &h).ok());
    EXPECT_EQ(h.code, static_cast<uint32_t>(Code::kProtocolError));
  }
  ASSERT_TRUE(Ask(9, {{"t", "k", g}}).ok());
  EXPECT_TRUE(client.Read(ep, {9, 0, g, 0, 64}, dest.data()).ok());
  const transfer::DataServerStats s = server.Stats();
  EXPECT_EQ(s.reads, 3u);
  EXPECT_EQ(s.refusals, 5u);
  EXPECT_EQ(s.bytes_out, 3 * kMiB + 17 + 10 + 64);
  // Nothing listens any more: UNAVAILABLE, not a hang.
  server.Stop();
  auto fresh = transfer::TcpTransport::Create({});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->Read(ep, {9, 0, g, 0, 64}, dest.data()).code(), Code::kUnavailable);
}

// AUTHORIZE over the data channel: the same request and answer as
// Peer/Authorize, refusals that leave the connection usable, and frames that
// are not well formed.
// An authorization asked not to wait is decided at once when it can be; when
// it would wait (an item held only on SSD, the requester's budget wait) it
// leaves nothing behind, and the same ticket is decided later with a wait.
TEST_F(GrantsTest, AnAuthorizationThatMayNotWaitGivesWayAndLeavesNothingBehind) {
  GrantTable& t = Table(/*budget=*/3 * kMiB);
  AttachSsd(16 * kMiB);
  const uint64_t hot = Put("hot", kMiB, 'h');
  const uint64_t cold = Put("cold", kMiB, 'c');
  ASSERT_EQ(store_->admin().EvictKeys("t", std::vector<std::string>{"cold"}), 1u);
  const GrantStats before = t.Stats();
  auto gave_way = Ask(1, {{"t", "hot", hot}, {"t", "cold", cold}}, "req-1", false);
  EXPECT_EQ(gave_way.status().code(), Code::kRetry) << gave_way.status().ToString();
  GrantStats after = t.Stats();
  EXPECT_EQ(after.sessions, 0u);
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_EQ(after.authorizations, before.authorizations);
  EXPECT_EQ(after.items_granted, before.items_granted);
  EXPECT_EQ(after.refused_stale + after.refused_budget + after.refused_other, 0u);
  EXPECT_EQ(t.Open(1, 0, hot).status().code(), Code::kNotFound);
  // In DRAM: decided at once.
  auto at_once = Ask(2, {{"t", "hot", hot}}, "req-1", false);
  ASSERT_TRUE(at_once.ok()) << at_once.status().ToString();
  EXPECT_TRUE((*at_once)[0].status.ok());
  // The ticket that gave way, asked again where waiting is allowed: rewarmed.
  auto waited = Ask(1, {{"t", "hot", hot}, {"t", "cold", cold}});
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_TRUE((*waited)[0].status.ok());
  EXPECT_TRUE((*waited)[1].status.ok());
  Result<transfer::GrantSpan> span = t.Open(1, 1, cold);
  ASSERT_TRUE(span.ok()) << span.status().ToString();
  EXPECT_EQ(span->data[0], 'c');
  span = Status(Code::kNotFound, "let go");  // a READ's hold on the grant ends
  // 3 MiB of budget, 2 MiB lent to req-1 (hot's once per grant, cold):
  // another 2 MiB for req-1 would wait for its releases, so it gives way
  // without waiting; for a requester with nothing open it is refused at once.
  const uint64_t big = Put("big", 2 * kMiB, 'b');
  after = t.Stats();
  EXPECT_EQ(Ask(3, {{"t", "big", big}}, "req-1", false).status().code(), Code::kRetry);
  EXPECT_EQ(t.Stats().budget_waits, after.budget_waits);
  EXPECT_EQ(t.Stats().reserved_bytes, after.reserved_bytes);
  auto refused = Ask(4, {{"t", "big", big}}, "req-2", false);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ((*refused)[0].status.code(), Code::kNoSpace);
  EXPECT_EQ(t.Stats().refused_budget, after.refused_budget + 1);
  EXPECT_EQ(t.Stats().budget_waits, after.budget_waits);
  // Nothing that gave way holds a pin: once the grants end, every value may go.
  EXPECT_TRUE(t.Release("req-1", 1));
  EXPECT_TRUE(t.Release("req-1", 2));
  EXPECT_EQ(t.Stats().reserved_bytes, 0u);
  EXPECT_EQ(store_->admin().EvictKeys("t", std::vector<std::string>{"hot", "cold", "big"}), 3u);
}

// Over the data channel: an item held only on SSD is decided on the blocking
// pool (a rewarm may take a while), one in DRAM on the connection's thread.
TEST_F(GrantsTest, TheDataChannelDecidesOnlyWhatMustWaitOffItsEventLoop) {
  GrantTable& t = Table(8 * kMiB);
  AttachSsd(16 * kMiB);
  const uint64_t hot = Put("hot", 5000, 'h');
  const uint64_t cold = Put("cold", 6000, 'c');
  ASSERT_EQ(store_->admin().EvictKeys("t", std::vector<std::string>{"cold"}), 1u);
  DataChannelGrants grants(&t);
  Channel ch = Serve(grants);
  ASSERT_TRUE(ch.client);
  for (const auto& [ticket, key, generation, size, fill] :
       {std::tuple{uint64_t{1}, "hot", hot, 5000, 'h'},
        std::tuple{uint64_t{2}, "cold", cold, 6000, 'c'}}) {
    Result<std::string> answer =
        ch.client->Authorize(ch.ep, ticket, EncodedAuthorize(ticket, key, generation), 5000);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    peer::AuthorizeResponse resp;
    ASSERT_TRUE(resp.ParseFromString(*answer));
    ASSERT_EQ(resp.items_size(), 1);
    EXPECT_EQ(resp.items(0).code(), 0u) << key;
    std::vector<uint8_t> dest(size);
    ASSERT_TRUE(ch.client->Read(ch.ep, {ticket, 0, generation, 0, dest.size()}, dest.data()).ok());
    EXPECT_TRUE(std::all_of(dest.begin(), dest.end(), [&](uint8_t b) { return b == fill; }));
  }
  EXPECT_EQ(ch.server->Stats().decided_at_once, 1u);
  EXPECT_EQ(ch.server->Stats().decided_on_pool, 1u);
  EXPECT_EQ(ch.server->Stats().authorizations, 2u);
}

TEST_F(GrantsTest, TheDataChannelAuthorizesAndTheGrantIsReadOnTheSameChannel) {
  GrantTable& t = Table();
  const uint64_t g = Put("k", 5000, 'w');
  DataChannelGrants grants(&t);
  Channel ch = Serve(grants);
  ASSERT_TRUE(ch.client);
  transfer::TcpTransport& client = *ch.client;
  auto request = [](uint64_t ticket, uint64_t generation, std::vector<uint64_t> release = {}) {
    return EncodedAuthorize(ticket, "k", generation, release);
  };
  Result<std::string> answer = client.Authorize(ch.ep, 21, request(21, g), 5000);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  peer::AuthorizeResponse resp;
  ASSERT_TRUE(resp.ParseFromString(*answer));
  EXPECT_EQ(resp.ticket(), 21u);
  ASSERT_EQ(resp.items_size(), 1);
  EXPECT_EQ(resp.items(0).code(), 0u);
  EXPECT_EQ(resp.items(0).size(), 5000u);
  std::vector<uint8_t> dest(5000);
  ASSERT_TRUE(client.Read(ch.ep, {21, 0, g, 0, dest.size()}, dest.data()).ok());
  EXPECT_TRUE(std::all_of(dest.begin(), dest.end(), [](uint8_t c) { return c == 'w'; }));
  // Per item, as over gRPC: another generation is refused, the call is not.
  answer = client.Authorize(ch.ep, 22, request(22, g + 1), 5000);
  ASSERT_TRUE(answer.ok());
  ASSERT_TRUE(resp.ParseFromString(*answer));
  EXPECT_EQ(resp.items(0).code(), static_cast<uint32_t>(Code::kNotFound));
  // Whole-call refusals; the connection stays usable after each.
  EXPECT_EQ(client.Authorize(ch.ep, 23, "not a protobuf \xff\xff", 5000).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(client.Authorize(ch.ep, 24, request(25, g), 5000).status().code(),
            Code::kInvalidArgument);  // the frame's ticket is not the payload's
  EXPECT_EQ(client.Authorize(ch.ep, 21, request(21, g), 5000).status().code(),
            Code::kInvalidArgument);  // already live
  // Releases travel with an authorization, released first.
  answer = client.Authorize(ch.ep, 26, request(26, g, {21, 22}), 5000);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(client.Read(ch.ep, {21, 0, g, 0, 1}, dest.data()).code(), Code::kNotFound);
  EXPECT_TRUE(client.Read(ch.ep, {26, 0, g, 0, 1}, dest.data()).ok());
  EXPECT_EQ(ch.server->Stats().authorizations, 3u);
  // Every one of them, refusals included, was decided at once on the
  // connection's own thread: nothing had to wait for the disk or the budget.
  EXPECT_EQ(ch.server->Stats().decided_at_once, 6u);
  EXPECT_EQ(ch.server->Stats().decided_on_pool, 0u);
  // An AUTHORIZE frame with item, generation or offset set, or an oversized
  // payload: PROTOCOL_ERROR and a closed connection.
  for (int bad = 0; bad < 2; ++bad) {
    asio::io_context io;
    asio::ip::tcp::socket raw(io);
    raw.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(ch.server->port())});
    transfer::ReadRequest r;
    r.op = transfer::kOpAuthorize;
    r.ticket = 30;
    r.item = bad == 0 ? 1 : 0;
    r.length = bad == 0 ? 10 : transfer::kMaxControlBytes + 1;
    uint8_t frame[transfer::kRequestBytes];
    transfer::EncodeRequest(r, frame);
    asio::write(raw, asio::buffer(frame));
    uint8_t head[transfer::kResponseBytes];
    asio::read(raw, asio::buffer(head));
    transfer::ResponseHead h;
    ASSERT_TRUE(transfer::DecodeResponse(head, &h).ok());
    EXPECT_EQ(h.code, static_cast<uint32_t>(Code::kProtocolError)) << bad;
  }
  // A grant source that does not authorize over the data channel says so.
  Channel plain = Serve(t);
  ASSERT_TRUE(plain.client);
  EXPECT_EQ(plain.client->Authorize(plain.ep, 40, request(40, g), 5000).status().code(),
            Code::kNotSupported);
}

// A whole value (or a large range of it) is hashed by its first READ only;
// later READs of it send the kept checksum (counted). Bytes altered in the
// owner's memory after the first hash are then refused by the reader.
TEST_F(GrantsTest, AWholeValueIsHashedOnceAndItsChecksumKept) {
  GrantTable& t = Table(16 * kMiB);
  const uint64_t big = 3 * kMiB + 17, small = 4000;  // several pieces; one piece
  const uint64_t gb = Put("big", big, 'b');
  const uint64_t gs = Put("small", small, 's');
  Channel ch = Serve(t);
  ASSERT_TRUE(ch.client);
  transfer::DataServer& server = *ch.server;
  const std::string& ep = ch.ep;
  transfer::TcpTransport& client = *ch.client;
  ASSERT_TRUE(Ask(21, {{"t", "big", gb}, {"t", "small", gs}}).ok());
  std::vector<uint8_t> dest(big);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(client.Read(ep, {21, 0, gb, 0, big}, dest.data()).ok()) << round;
    EXPECT_TRUE(std::all_of(dest.begin(), dest.end(), [](uint8_t c) { return c == 'b'; }));
    ASSERT_TRUE(client.Read(ep, {21, 1, gs, 0, small}, dest.data()).ok()) << round;
    EXPECT_EQ(server.Stats().checksums_reused, round == 0 ? 0u : 2u);
  }
  // A large range is kept too (the next READ of it is answered unhashed); a
  // small one is hashed each time.
  ASSERT_TRUE(client.Read(ep, {21, 0, gb, 4096, kMiB}, dest.data()).ok());
  EXPECT_EQ(server.Stats().checksums_reused, 2u);
  ASSERT_TRUE(client.Read(ep, {21, 0, gb, 4096, kMiB}, dest.data()).ok());
  EXPECT_EQ(server.Stats().checksums_reused, 3u);
  ASSERT_TRUE(client.Read(ep, {21, 0, gb, 100, 10}, dest.data()).ok());
  ASSERT_TRUE(client.Read(ep, {21, 0, gb, 100, 10}, dest.data()).ok());
  EXPECT_EQ(server.Stats().checksums_reused, 3u);

  // Scribble on the owner's copy: a whole READ or one of the kept range sends
  // the kept checksum, which no longer matches, so the reader refuses the
  // bytes; a small range is hashed afresh and still reads.
  Result<transfer::GrantSpan> span = t.Open(21, 0, gb);
  ASSERT_TRUE(span.ok());
  Scribble(span->data + 5, 'X');
  EXPECT_EQ(client.Read(ep, {21, 0, gb, 0, big}, dest.data()).code(), Code::kIoError);
  Scribble(span->data + 5000, 'Y');
  EXPECT_EQ(client.Read(ep, {21, 0, gb, 4096, kMiB}, dest.data()).code(), Code::kIoError);
  EXPECT_TRUE(client.Read(ep, {21, 0, gb, 0, 64}, dest.data()).ok());
  EXPECT_EQ(dest[5], 'X');
  span = Status(Code::kInternal, "dropped");
  server.Stop();
}

// Several connections at once, spread over the server's threads (one
// io_context each): every reader gets its whole multi-piece value. A started
// server cannot be started again, nor a stopped one restarted.
TEST_F(GrantsTest, ConcurrentReadersOverEveryServerThreadEachGetTheirBytes) {
  GrantTable& t = Table(16 * kMiB);
  constexpr int kReaders = 6;
  std::vector<uint64_t> gens;
  for (int i = 0; i < kReaders; ++i) {
    gens.push_back(Put("k" + std::to_string(i), 2 * kMiB + 3 * i, static_cast<char>('a' + i)));
  }
  transfer::DataServerOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 3;
  transfer::DataServer server(o, &t);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Start().code(), Code::kInternal);
  const std::string ep = "127.0.0.1:" + std::to_string(server.port());
  transfer::TcpTransportOptions to;
  to.connections_per_peer = kReaders;
  auto made = transfer::TcpTransport::Create(to);
  ASSERT_TRUE(made.ok());
  std::vector<GrantRequestItem> items;
  for (int i = 0; i < kReaders; ++i) items.push_back({"t", "k" + std::to_string(i), gens[i]});
  ASSERT_TRUE(Ask(11, items).ok());
  std::vector<Status> got(kReaders);
  std::vector<std::vector<uint8_t>> dest(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    dest[i].resize(2 * kMiB + 3 * i);
    readers.emplace_back([&, i] {
      got[i] = (*made)->Read(ep, {11, static_cast<uint32_t>(i), gens[i], 0, dest[i].size()},
                             dest[i].data());
    });
  }
  for (std::thread& r : readers) r.join();
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].ToString();
    const uint8_t fill = static_cast<uint8_t>('a' + i);
    EXPECT_TRUE(std::all_of(dest[i].begin(), dest[i].end(), [&](uint8_t c) { return c == fill; }))
        << i;
  }
  const transfer::DataServerStats s = server.Stats();
  EXPECT_EQ(s.reads, static_cast<uint64_t>(kReaders));
  EXPECT_GE(s.connections_total, 1u);
  server.Stop();
  EXPECT_EQ(server.Start().code(), Code::kInternal);
}

// A reader that polls the socket before it sleeps reads the same bytes as one
// that sleeps at once; the one that sleeps never polls.
TEST_F(GrantsTest, APollingReaderAndASleepingOneReadTheSameBytes) {
  GrantTable& t = Table(16 * kMiB);
  const uint64_t small = Put("small", 4096, 's');
  const uint64_t large = Put("large", 3 * kMiB + 7, 'l');
  ASSERT_TRUE(Ask(21, {{"t", "small", small}, {"t", "large", large}}).ok());
  Channel c = Serve(t);
  transfer::TcpTransportOptions polling;
  polling.spin_us = 400;
  transfer::TcpTransportOptions sleeping;
  auto poller = transfer::TcpTransport::Create(polling);
  auto sleeper = transfer::TcpTransport::Create(sleeping);
  ASSERT_TRUE(poller.ok() && sleeper.ok());
  for (transfer::TcpTransport* reader : {poller->get(), sleeper->get()}) {
    for (int n = 0; n < 20; ++n) {
      const bool big = n % 2 == 1;
      std::vector<uint8_t> dest(big ? 3 * kMiB + 7 : 4096);
      const Status st =
          reader->Read(c.ep, {21, big ? 1u : 0u, big ? large : small, 0, dest.size()}, dest.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      const uint8_t fill = big ? 'l' : 's';
      ASSERT_TRUE(std::all_of(dest.begin(), dest.end(), [&](uint8_t b) { return b == fill; }));
    }
  }
  // Whether a reader had to wait at all depends on how fast the owner's
  // thread fills the socket, so only what holds either way is checked here
  // (DataChannel.APollingReaderStillTimesOutASilentOwner makes both wait).
  const transfer::TcpTransportWaits slept = (*sleeper)->Waits();
  EXPECT_EQ(slept.polled, 0u);
  EXPECT_EQ(slept.caught, 0u);
  const transfer::TcpTransportWaits polled = (*poller)->Waits();
  EXPECT_LE(polled.caught, polled.polled);
}

// The owner closes a connection that stayed idle past its idle timeout: the
// reader's next READ and AUTHORIZE (each on a pool of its own) find the
// pooled connection gone and open a new one, instead of failing on it.
TEST_F(GrantsTest, AReaderReplacesAConnectionTheOwnerClosedWhileItWasIdle) {
  GrantTable& t = Table(16 * kMiB);
  const uint64_t g = Put("k", 8192, 'k');
  ASSERT_TRUE(Ask(31, {{"t", "k", g}}).ok());
  DataChannelGrants grants(&t);
  transfer::DataServerOptions o;
  o.idle_timeout_ms = 50;
  Channel c = Serve(grants, o);
  auto closed = [&](uint64_t accepted) {
    return testing::WaitFor([&] {
      const transfer::DataServerStats s = c.server->Stats();
      return s.connections_total == accepted && s.connections == 0;
    });
  };
  std::vector<uint8_t> dest(8192);
  for (uint64_t round = 1; round <= 3; ++round) {
    const Status st = c.client->Read(c.ep, {31, 0, g, 0, dest.size()}, dest.data());
    ASSERT_TRUE(st.ok()) << round << ": " << st.ToString();
    EXPECT_TRUE(std::all_of(dest.begin(), dest.end(), [](uint8_t b) { return b == 'k'; }));
    ASSERT_TRUE(closed(round)) << "the owner did not close the idle connection";
  }
  for (uint64_t round = 4; round <= 5; ++round) {
    const uint64_t ticket = 100 + round;
    Result<std::string> answer =
        c.client->Authorize(c.ep, ticket, EncodedAuthorize(ticket, "k", g), 5000);
    ASSERT_TRUE(answer.ok()) << round << ": " << answer.status().ToString();
    peer::AuthorizeResponse resp;
    ASSERT_TRUE(resp.ParseFromString(*answer));
    ASSERT_EQ(resp.items_size(), 1);
    EXPECT_EQ(resp.items(0).code(), 0u);
    ASSERT_TRUE(closed(round));
  }
  c.server->Stop();
}

// An owner that never answers: a reader that polls first still gives up after
// its I/O budget, as one that sleeps does, and closes the connection.
TEST(DataChannel, APollingReaderStillTimesOutASilentOwner) {
  asio::io_context io;
  asio::ip::tcp::acceptor acc(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::thread owner([&] {
    asio::ip::tcp::socket s(io);
    acc.accept(s);
    uint8_t req[transfer::kRequestBytes];
    asio::read(s, asio::buffer(req));
    uint8_t end = 0;
    asio::error_code ec;
    asio::read(s, asio::buffer(&end, 1), ec);  // no answer; until the reader hangs up
  });
  transfer::TcpTransportOptions o;
  o.spin_us = 400;
  o.io_timeout_ms = 200;
  auto made = transfer::TcpTransport::Create(o);
  ASSERT_TRUE(made.ok());
  std::vector<uint8_t> dest(4096);
  const Status st = (*made)->Read("127.0.0.1:" + std::to_string(acc.local_endpoint().port()),
                                  {1, 0, 1, 0, dest.size()}, dest.data());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.ToString();
  owner.join();  // the reader closed the connection: the owner's read ended
  const transfer::TcpTransportWaits w = (*made)->Waits();
  EXPECT_GE(w.polled, 1u);
  EXPECT_EQ(w.caught, 0u);  // nothing ever came
  EXPECT_GE(w.slept, 1u);
}

// A stand-in owner that answers one READ with the asked bytes, their trailer
// hash off by one: the requester must refuse them, whether the value arrives
// in one piece or in several hashed as they come.
TEST(DataChannel, AReaderRefusesBytesWhoseChecksumDoesNotMatch) {
  for (const uint64_t size : {uint64_t{4096}, 3 * kMiB + 5}) {
    asio::io_context io;
    asio::ip::tcp::acceptor acc(io, {asio::ip::make_address("127.0.0.1"), 0});
    std::thread owner([&] {
      asio::ip::tcp::socket s(io);
      acc.accept(s);
      uint8_t req[transfer::kRequestBytes];
      asio::read(s, asio::buffer(req));
      transfer::ReadRequest r;
      ASSERT_TRUE(transfer::DecodeRequest(req, &r).ok());
      uint8_t head[transfer::kResponseBytes];
      transfer::EncodeResponse({0, r.length}, head);
      const std::vector<uint8_t> body(r.length, 'z');
      uint8_t trailer[transfer::kTrailerBytes];
      transfer::PutU64(XXH3_64bits(body.data(), body.size()) + 1, trailer);
      asio::write(s, std::array<asio::const_buffer, 3>{asio::buffer(head), asio::buffer(body),
                                                       asio::buffer(trailer)});
      uint8_t end = 0;
      asio::error_code ec;
      asio::read(s, asio::buffer(&end, 1), ec);  // until the reader hangs up
    });
    auto made = transfer::TcpTransport::Create({});
    ASSERT_TRUE(made.ok());
    std::vector<uint8_t> dest(size);
    const Status st = (*made)->Read("127.0.0.1:" + std::to_string(acc.local_endpoint().port()),
                                    {1, 0, 1, 0, size}, dest.data());
    EXPECT_EQ(st.code(), Code::kIoError) << size;
    EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.ToString();
    made->reset();  // closes the connection; the stand-in owner ends
    owner.join();
  }
}

}  // namespace
}  // namespace tierkv
