#include "protocol/messages.h"

#include <gtest/gtest.h>

namespace tierkv::proto {
namespace {

TEST(Reader, TruncatedInputFailsWithoutReadingPastTheEnd) {
  std::string buf;
  Writer w(&buf);
  w.Str("tenant");
  w.U32(1000);  // claims a 1000-byte string that is not there
  Reader r(buf);
  EXPECT_EQ(r.Str(), "tenant");
  EXPECT_EQ(r.Str(), "");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.U64(), 0u);
  EXPECT_EQ(r.Finish("x").code(), Code::kProtocolError);
}

TEST(Reader, TrailingBytesAreAnError) {
  std::string buf;
  Writer w(&buf);
  w.U64(1);
  w.U8(0);
  Reader r(buf);
  r.U64();
  Status st = r.Finish("commit");
  EXPECT_EQ(st.code(), Code::kProtocolError);
  EXPECT_NE(st.message().find("trailing"), std::string::npos);
}

TEST(Reader, CountRefusesAListThatCannotFit) {
  std::string buf;
  Writer w(&buf);
  w.U32(0xFFFFFFFF);  // four billion items in a 4-byte body: a lie
  Reader r(buf);
  EXPECT_EQ(r.Count(4), 0u);
  EXPECT_FALSE(r.ok());
}

TEST(Messages, BatchKeysRoundTripAndLimit) {
  BatchKeysRequest req;
  req.tenant = "t";
  req.keys = {"a", std::string_view("b\0c", 3), ""};
  std::string buf;
  Writer w(&buf);
  req.Encode(w);
  BatchKeysRequest got;
  Reader r(buf);
  ASSERT_TRUE(got.Decode(r, 10).ok());
  EXPECT_EQ(got.tenant, "t");
  ASSERT_EQ(got.keys.size(), 3u);
  EXPECT_EQ(got.keys[1], std::string_view("b\0c", 3));
  Reader r2(buf);
  Status st = got.Decode(r2, 2);
  EXPECT_EQ(st.code(), Code::kTooLarge);
}

TEST(Messages, AllocAndPutRoundTrip) {
  std::string buf;
  Writer w(&buf);
  AllocRequest{"default", "key", 4096, "grp", kPutUpsert}.Encode(w);
  AllocRequest a;
  Reader r(buf);
  ASSERT_TRUE(a.Decode(r).ok());
  EXPECT_EQ(a.key, "key");
  EXPECT_EQ(a.size, 4096u);
  EXPECT_EQ(a.group_id, "grp");
  EXPECT_EQ(a.flags, kPutUpsert);

  buf.clear();
  PutRequest{"default", "k", "", 0, "value-bytes"}.Encode(w);
  PutRequest p;
  Reader r2(buf);
  ASSERT_TRUE(p.Decode(r2).ok());
  EXPECT_EQ(p.value, "value-bytes");
}

TEST(Messages, ObjectInfoAndItemStatusRoundTrip) {
  std::string buf;
  Writer w(&buf);
  ObjectInfo info;
  info.size = 42;
  info.group_id = "g";
  info.media = 2;
  info.active_leases = 1;
  EncodeObjectInfo(w, info);
  w.ItemStatus(Status(Code::kNoSpace, "full"));
  w.ItemStatus(Status::Ok());
  Reader r(buf);
  ObjectInfo got = DecodeObjectInfo(r);
  EXPECT_EQ(got.size, 42u);
  EXPECT_EQ(got.group_id, "g");
  EXPECT_EQ(got.media, 2u);
  Status st = r.ItemStatus();
  EXPECT_EQ(st.code(), Code::kNoSpace);
  EXPECT_EQ(st.message(), "full");
  EXPECT_TRUE(r.ItemStatus().ok());
  EXPECT_TRUE(r.done());
}

// Encodes `m` and decodes the bytes into a fresh T (which must succeed).
template <typename T>
T RoundTrip(const T& m) {
  std::string buf;
  Writer w(&buf);
  m.Encode(w);
  T out;
  Reader r(buf);
  EXPECT_TRUE(out.Decode(r).ok());
  return out;
}

TEST(Messages, HelloFlagsAndGenerationFieldsAreOptionalTrailingFields) {
  // No namespace, no flags: nothing trailing.
  EXPECT_EQ(RoundTrip(HelloRequest{3, "c", {}}).flags, 0);
  HelloRequest flagged{3, "c", {}};
  flagged.flags = kHelloGenerations;  // an empty namespace goes first
  const HelloRequest got = RoundTrip(flagged);
  EXPECT_EQ(got.rank, 3u);
  EXPECT_TRUE(got.name_space.empty());
  EXPECT_EQ(got.flags, kHelloGenerations);

  HelloReply rep;
  rep.session_id = 9;
  EXPECT_FALSE(RoundTrip(rep).has_generations_fields);
  rep.has_generations_fields = true;
  rep.generations = 1;
  rep.generation_page_bytes = 4096;
  const HelloReply now = RoundTrip(rep);
  EXPECT_TRUE(now.has_generations_fields);
  EXPECT_EQ(now.generations, 1);
  EXPECT_EQ(now.generation_page_bytes, 4096u);
  EXPECT_EQ(now.session_id, 9u);
}

TEST(Messages, LocateReplyIsTheLeaseReplyAndAGeneration) {
  std::string buf;
  Writer w(&buf);
  EncodeLocateReply(w, {0, 8192, 100, 0, 77});
  EXPECT_EQ(buf.size(), 36u);
  Reader r(buf);
  const LeaseReply l = DecodeLocateReply(r);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(l.lease_id, 0u);
  EXPECT_EQ(l.offset, 8192u);
  EXPECT_EQ(l.size, 100u);
  EXPECT_EQ(l.generation, 77u);
}

TEST(Messages, UnknownItemStatusCodeIsAProtocolError) {
  std::string buf;
  Writer w(&buf);
  w.U16(999);
  Reader r(buf);
  EXPECT_EQ(r.ItemStatus().code(), Code::kProtocolError);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace tierkv::proto

namespace tierkv::proto {
namespace {

std::string EncodedInto(const GetIntoRequest& req) {
  std::string buf;
  Writer w(&buf);
  req.Encode(w);
  return buf;
}

TEST(Messages, GetIntoRequestRoundTripsItsItemsAndPieces) {
  GetIntoRequest req;
  req.tenant = "t";
  req.items = {{"a", kIntoExact, 0, 2}, {"bb", 0, 2, 1}};
  req.pieces = {{1, 0, 100}, {2, 4096, 50}, {1, 100, 7}};
  const std::string buf = EncodedInto(req);
  Reader r(buf);
  GetIntoRequest back;
  ASSERT_TRUE(back.Decode(r, 16, 16).ok());
  EXPECT_EQ(back.tenant, "t");
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[0].key, "a");
  EXPECT_EQ(back.items[0].flags, kIntoExact);
  EXPECT_EQ(back.items[1].first_piece, 2u);
  EXPECT_EQ(back.items[1].piece_count, 1u);
  ASSERT_EQ(back.pieces.size(), 3u);
  EXPECT_EQ(back.pieces[1].region, 2u);
  EXPECT_EQ(back.pieces[1].offset, 4096u);
  EXPECT_EQ(back.pieces[2].length, 7u);
}

TEST(Messages, GetIntoRequestRefusesWhatItCannotServe) {
  auto decode = [](const GetIntoRequest& req, uint32_t max_batch, uint32_t max_pieces) {
    const std::string buf = EncodedInto(req);
    Reader r(buf);
    GetIntoRequest back;
    return back.Decode(r, max_batch, max_pieces).code();
  };
  GetIntoRequest req;
  req.tenant = "t";
  req.items = {{"a", 0, 0, 2}};
  req.pieces = {{1, 0, 1}, {1, 1, 1}};
  EXPECT_EQ(decode(req, 16, 1), Code::kTooLarge);  // pieces over the limit
  EXPECT_EQ(decode(req, 0, 16), Code::kTooLarge);  // items over the limit
  req.items[0].flags = 4;
  EXPECT_EQ(decode(req, 16, 16), Code::kInvalidArgument);  // unknown flag bits
  req.items = {{"a", 0, 0, 0}};
  EXPECT_EQ(decode(req, 16, 16), Code::kInvalidArgument);  // no memory to fill
  // A piece count that the body cannot hold.
  std::string lie;
  Writer w(&lie);
  w.Str("t");
  w.U32(1);
  w.Str("a");
  w.U8(0);
  w.U32(1000000);
  Reader r(lie);
  GetIntoRequest back;
  EXPECT_EQ(back.Decode(r, 16, 1u << 30).code(), Code::kProtocolError);
}

}  // namespace
}  // namespace tierkv::proto
