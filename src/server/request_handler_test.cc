// RequestHandler without a socket: frames in, replies out, against a store on
// a manual clock.
#include "server/request_handler.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "protocol/messages.h"
#include "server/server.h"
#include "store/store_test_util.h"

namespace tierkv {
namespace {

using proto::Opcode;

class RequestHandlerTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.lease_ms = 100;
    Make(16 * kMiB, o);
    options_.max_frame_bytes = 64 * 1024;
    options_.max_batch = 8;
  }

  std::unique_ptr<RequestHandler> Connect(bool shm) {
    auto h = std::make_unique<RequestHandler>(
        HandlerContext{&options_, store_.get(), &metrics_, nullptr}, shm, ++session_);
    EXPECT_TRUE(Call(*h, Opcode::kHello, [](proto::Writer& w) {
                  proto::HelloRequest{7, "test", {}}.Encode(w);
                }).ok());
    return h;
  }

  // One request: its status; its reply body in reply_.
  template <typename Encode>
  Status Call(RequestHandler& h, Opcode op, Encode encode, uint8_t flags = 0) {
    std::string body;
    proto::Writer w(&body);
    encode(w);
    proto::FrameHeader fh;
    fh.opcode = static_cast<uint16_t>(op);
    fh.flags = flags;
    reply_.clear();
    Status st = h.Handle(fh, body, &reply_);
    if (!st.ok()) reply_.clear();
    return st;
  }

  Status PutInline(RequestHandler& h, std::string_view key, std::string_view value) {
    return Call(h, Opcode::kPut, [&](proto::Writer& w) {
      proto::PutRequest{"t", key, "", 0, value}.Encode(w);
    });
  }

  Result<proto::LeaseReply> Lease(RequestHandler& h, std::string_view key) {
    Status st = Call(h, Opcode::kLease, [&](proto::Writer& w) {
      proto::KeyRequest{"t", key}.Encode(w);
    });
    if (!st.ok()) return st;
    proto::Reader r(reply_);
    return proto::DecodeLeaseReply(r);
  }

  ServerOptions options_;
  ClientMetrics metrics_;
  uint64_t session_ = 0;
  std::string reply_;
};

TEST_F(RequestHandlerTest, HelloAnswersTheLimitsAndRefusesAMalformedNamespace) {
  RequestHandler h({&options_, store_.get(), &metrics_, nullptr}, true, 1);
  EXPECT_FALSE(h.hello_done());
  EXPECT_EQ(Call(h, Opcode::kHello,
                 [](proto::Writer& w) {
                   proto::HelloRequest{0, "x", "nonsense"}.Encode(w);
                 })
                .code(),
            Code::kInvalidArgument);
  EXPECT_FALSE(h.hello_done());
  ASSERT_TRUE(Call(h, Opcode::kHello, [](proto::Writer& w) {
                proto::HelloRequest{3, "x", {}, proto::kHelloGenerations}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  proto::HelloReply rep;
  ASSERT_TRUE(rep.Decode(r).ok());
  EXPECT_EQ(rep.max_frame_bytes, options_.max_frame_bytes);
  EXPECT_EQ(rep.max_batch, 8u);
  EXPECT_EQ(rep.lease_ms, 100u);
  EXPECT_EQ(rep.shm, 1);
  EXPECT_EQ(rep.generations, 1);
  EXPECT_TRUE(h.hello_done());
  EXPECT_TRUE(h.send_generations());
}

// Without an HBM tier a session that asks for the pools is told there are
// none, and placements it asks for say DRAM; the new flag bits are refused
// where they mean nothing.
TEST_F(RequestHandlerTest, HbmFlagsWithoutAnHbmTierAnswerDram) {
  RequestHandler h({&options_, store_.get(), &metrics_, nullptr}, true, 1);
  ASSERT_TRUE(Call(h, Opcode::kHello, [](proto::Writer& w) {
                proto::HelloRequest{0, "x", {}, proto::kHelloHbm}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  proto::HelloReply rep;
  ASSERT_TRUE(rep.Decode(r).ok());
  EXPECT_TRUE(rep.has_generations_fields);
  EXPECT_EQ(rep.generations, 0);  // not asked for
  EXPECT_TRUE(rep.has_hbm_fields);
  EXPECT_TRUE(rep.hbm_pools.empty());
  EXPECT_FALSE(h.hbm_session());

  ASSERT_TRUE(Call(h, Opcode::kAlloc, [](proto::Writer& w) {
                proto::AllocRequest{"t", "k", 4, "", proto::kPutHbm}.Encode(w);
              }).ok());
  proto::Reader a(reply_);
  const proto::AllocReply g = proto::DecodeAllocReply(a);
  Medium medium = Medium::kSsd;
  uint32_t pool = 9;
  ASSERT_TRUE(proto::DecodePlacement(a, &medium, &pool));
  EXPECT_TRUE(a.done());
  EXPECT_EQ(medium, Medium::kDram);
  EXPECT_EQ(pool, 0u);
  ASSERT_TRUE(Call(h, Opcode::kCommit, [&](proto::Writer& w) {
                proto::IdRequest{g.alloc_id}.Encode(w);
              }).ok());
  ASSERT_TRUE(Call(h, Opcode::kLease, [](proto::Writer& w) {
                proto::KeyRequest{"t", "k", proto::kLookupHbm}.Encode(w);
              }).ok());
  proto::Reader l(reply_);
  (void)proto::DecodeLeaseReply(l);
  ASSERT_TRUE(proto::DecodePlacement(l, &medium, &pool));
  EXPECT_TRUE(l.done());
  EXPECT_EQ(medium, Medium::kDram);
  // Refused: the hbm bit on an inline put, local_only on a lease, hbm on an exist.
  EXPECT_EQ(Call(h, Opcode::kPut,
                 [](proto::Writer& w) {
                   proto::PutRequest{"t", "p", "", proto::kPutHbm, "v"}.Encode(w);
                 })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Call(h, Opcode::kLease,
                 [](proto::Writer& w) {
                   proto::KeyRequest{"t", "k", proto::kLookupLocalOnly}.Encode(w);
                 })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Call(h, Opcode::kExist,
                 [](proto::Writer& w) {
                   proto::KeyRequest{"t", "k", proto::kLookupHbm}.Encode(w);
                 })
                .code(),
            Code::kInvalidArgument);
}

TEST_F(RequestHandlerTest, InlinePutAndGetRoundTrip) {
  auto h = Connect(false);
  ASSERT_TRUE(PutInline(*h, "k", "value bytes").ok());
  ASSERT_TRUE(Call(*h, Opcode::kGet, [](proto::Writer& w) {
                proto::KeyRequest{"t", "k"}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  EXPECT_EQ(r.Str(), "value bytes");
  EXPECT_EQ(Call(*h, Opcode::kGet,
                 [](proto::Writer& w) {
                   proto::KeyRequest{"t", "absent"}.Encode(w);
                 })
                .code(),
            Code::kNotFound);
}

TEST_F(RequestHandlerTest, SharedMemoryCallsNeedAConnectionThatMapsThePool) {
  auto tcp = Connect(false);
  ASSERT_TRUE(PutInline(*tcp, "k", "v").ok());
  for (Opcode op : {Opcode::kLease, Opcode::kLocate, Opcode::kPin}) {
    EXPECT_EQ(Call(*tcp, op,
                   [](proto::Writer& w) {
                     proto::KeyRequest{"t", "k"}.Encode(w);
                   })
                  .code(),
              Code::kNotSupported);
  }
  EXPECT_EQ(Call(*tcp, Opcode::kAlloc,
                 [](proto::Writer& w) {
                   proto::AllocRequest{"t", "n", 4, "", 0}.Encode(w);
                 })
                .code(),
            Code::kNotSupported);
  auto shm = Connect(true);
  EXPECT_TRUE(Lease(*shm, "k").ok());
}

TEST_F(RequestHandlerTest, ALeaseReleasedAfterItsDeadlineOnTheManualClockHasExpired) {
  auto h = Connect(true);
  ASSERT_TRUE(PutInline(*h, "k", "v").ok());
  Result<proto::LeaseReply> l = Lease(*h, "k");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->deadline_nanos, clock_.NowNanos() + 100'000'000);
  clock_.AdvanceMillis(101);
  EXPECT_EQ(
      Call(*h, Opcode::kRelease, [&](proto::Writer& w) { proto::IdRequest{l->lease_id}.Encode(w); })
          .code(),
      Code::kLeaseExpired);
  Result<proto::LeaseReply> again = Lease(*h, "k");
  ASSERT_TRUE(again.ok());
  clock_.AdvanceMillis(50);
  EXPECT_TRUE(Call(*h, Opcode::kRelease, [&](proto::Writer& w) {
                proto::IdRequest{again->lease_id}.Encode(w);
              }).ok());
}

TEST_F(RequestHandlerTest, AConnectionThatEndsLeavesNoGrantLeaseOrPinBehind) {
  const uint64_t used_before = Used();
  {
    auto h = Connect(true);
    ASSERT_TRUE(PutInline(*h, "held", "leased and pinned").ok());
    ASSERT_TRUE(Call(*h, Opcode::kAlloc, [](proto::Writer& w) {
                  proto::AllocRequest{"t", "half", 4096, "", 0}.Encode(w);
                }).ok());
    ASSERT_TRUE(Lease(*h, "held").ok());
    ASSERT_TRUE(Call(*h, Opcode::kPin, [](proto::Writer& w) {
                  proto::KeyRequest{"t", "held"}.Encode(w);
                }).ok());
    EXPECT_TRUE(h->holds_pins());
  }
  // The half-written put is gone, and the value can go without force.
  auto other = Connect(false);
  EXPECT_EQ(Call(*other, Opcode::kExist,
                 [](proto::Writer& w) {
                   proto::KeyRequest{"t", "half"}.Encode(w);
                 })
                .code(),
            Code::kNotFound);
  ASSERT_TRUE(Call(*other, Opcode::kRemoveAll, [](proto::Writer& w) {
                proto::RemoveAllRequest{"t", 0}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  proto::RemoveAllReply rep;
  ASSERT_TRUE(rep.Decode(r).ok());
  EXPECT_EQ(rep.removed, 1u);
  EXPECT_EQ(rep.skipped, 0u);
  EXPECT_EQ(rep.cleared, 1);
  EXPECT_EQ(Used(), used_before);
}

TEST_F(RequestHandlerTest, BadFramesGetAnErrorAndChangeNothing) {
  auto h = Connect(true);
  ASSERT_TRUE(PutInline(*h, "k", "kept").ok());
  EXPECT_EQ(Call(*h, static_cast<Opcode>(99), [](proto::Writer&) {}).code(), Code::kNotSupported);
  EXPECT_EQ(Call(*h, Opcode::kGet, [](proto::Writer& w) { w.U8(1); }).code(), Code::kProtocolError);
  EXPECT_EQ(Call(
                *h, Opcode::kGet,
                [](proto::Writer& w) {
                  proto::KeyRequest{"t", "k"}.Encode(w);
                },
                proto::kFlagResponse)
                .code(),
            Code::kProtocolError);
  EXPECT_EQ(Call(*h, Opcode::kRemove,
                 [](proto::Writer& w) {
                   proto::KeyRequest{"t", "k", proto::kLookupLocalOnly}.Encode(w);
                 })
                .code(),
            Code::kInvalidArgument);
  std::vector<std::string_view> keys(9, "k");  // over max_batch
  EXPECT_NE(Call(*h, Opcode::kBatchGet,
                 [&](proto::Writer& w) {
                   proto::BatchKeysRequest{"t", keys}.Encode(w);
                 })
                .code(),
            Code::kOk);
  Result<std::string> v = Get("k", "t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "kept");
}

TEST_F(RequestHandlerTest, ABatchGetStopsAddingBytesAtTheFrameLimit) {
  auto h = Connect(false);
  const std::string big(40 * 1024, 'x');
  ASSERT_TRUE(PutInline(*h, "a", big).ok());
  ASSERT_TRUE(PutInline(*h, "b", big).ok());
  ASSERT_TRUE(PutInline(*h, "c", "small").ok());
  const std::vector<std::string_view> keys = {"a", "b", "c", "none"};
  ASSERT_TRUE(Call(*h, Opcode::kBatchGet, [&](proto::Writer& w) {
                proto::BatchKeysRequest{"t", keys}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  ASSERT_EQ(r.U32(), 4u);
  EXPECT_TRUE(r.ItemStatus().ok());
  EXPECT_EQ(r.Str().size(), big.size());
  EXPECT_EQ(r.ItemStatus().code(), Code::kRetry);  // b would pass the 64 KiB limit
  EXPECT_EQ(r.ItemStatus().code(), Code::kRetry);  // and so, after it, does c
  EXPECT_EQ(r.ItemStatus().code(), Code::kNotFound);
  EXPECT_TRUE(r.done());
  // Nothing stays leased: every value can go without force.
  ASSERT_TRUE(Call(*h, Opcode::kRemoveAll, [](proto::Writer& w) {
                proto::RemoveAllRequest{"t", 0}.Encode(w);
              }).ok());
  proto::Reader rr(reply_);
  proto::RemoveAllReply rep;
  ASSERT_TRUE(rep.Decode(rr).ok());
  EXPECT_EQ(rep.removed, 3u);
}

TEST_F(RequestHandlerTest, ListKeysTruncatesToTheFrameLimit) {
  options_.max_frame_bytes = 100;
  auto h = Connect(false);
  for (char c = 'a'; c <= 'z'; ++c) ASSERT_TRUE(PutInline(*h, std::string(10, c), "v").ok());
  ASSERT_TRUE(Call(*h, Opcode::kListKeys, [](proto::Writer& w) {
                proto::ListKeysRequest{"t", "", 0}.Encode(w);
              }).ok());
  proto::Reader r(reply_);
  proto::ListKeysReply rep;
  ASSERT_TRUE(rep.Decode(r).ok());
  EXPECT_EQ(rep.truncated, 1);
  EXPECT_EQ(rep.keys.size(), 7u);  // 7 x (4 + 10) bytes fit in 100
  EXPECT_EQ(rep.keys.front(), "aaaaaaaaaa");
}

}  // namespace
}  // namespace tierkv
