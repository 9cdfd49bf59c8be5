// Helpers of the drain tests: the peer calls a coordinator makes (DrainList,
// Pull, Drop), made by hand against one manager.
#ifndef TIERKV_TESTS_DRAIN_UTIL_H_
#define TIERKV_TESTS_DRAIN_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cluster_util.h"
#include "peer.grpc.pb.h"

namespace tierkv::cluster_test {

using testing::WaitFor;

// Drain requests name their caller, which must be a live member: `n` itself
// (its own node id and runtime UUID), as a coordinator would be.
inline peer::PeerCaller CallerFor(const Node& n) {
  peer::PeerCaller c;
  c.set_node_id(n.id);
  WaitFor([&] {
    const Json members = GetJson(*n.proc, "/cluster/members");
    for (const Json& m : members.value("members", Json::array())) {
      if (m.value("node_id", "") == n.id) c.set_runtime_uuid(m.value("runtime_uuid", ""));
    }
    return !c.runtime_uuid().empty();
  });
  return c;
}

// Peer/Drop on b with `fence`, for one key at `generation`, under a caller
// deadline of `deadline_ms`; the item's result.
inline peer::GrantedItem DropWithFence(const Node& b, const std::string& key, uint64_t generation,
                                       const std::string& fence_owner, uint64_t fence_sequence,
                                       int deadline_ms, const std::string& fence_uuid = "",
                                       uint64_t fence_epoch = 0) {
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(b.addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  peer::DropRequest req;
  *req.mutable_caller() = CallerFor(b);
  req.set_tenant(std::string(kDefaultTenant));
  peer::GrantItem* item = req.add_items();
  item->set_tenant(std::string(kDefaultTenant));
  item->set_key(key);
  item->set_generation(generation);
  req.mutable_fence()->set_owner(fence_owner);
  req.mutable_fence()->set_sequence(fence_sequence);
  req.mutable_fence()->set_owner_uuid(fence_uuid);
  req.mutable_fence()->set_epoch(fence_epoch);
  peer::ItemResults out;
  const grpc::Status st = stub->Drop(&ctx, req, &out);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return out.items_size() == 1 ? out.items(0) : peer::GrantedItem();
}

// The generation of b's replica of `key`, from its own drain listing.
inline uint64_t ListedGeneration(const Node& b, const std::string& key) {
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(b.addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  peer::DrainListRequest req;
  req.set_medium(255);
  *req.mutable_caller() = CallerFor(b);
  auto reader = stub->DrainList(&ctx, req);
  uint64_t generation = 0;
  for (peer::DrainListResponse page; reader->Read(&page);) {
    for (const peer::InventoryRecord& r : page.records()) {
      if (r.key() == key) generation = r.generation();
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  return generation;
}

// The runtime UUID of member `node` as `from`'s member list has it ("" when
// it is not listed within the wait).
inline std::string RuntimeUuid(const Node& from, const std::string& node) {
  std::string uuid;
  WaitFor([&] {
    const Json members = GetJson(*from.proc, "/cluster/members");
    for (const Json& m : members.value("members", Json::array())) {
      if (m.value("node_id", "") == node) uuid = m.value("runtime_uuid", "");
    }
    return !uuid.empty();
  });
  return uuid;
}

// Peer/Pull on `target` of `keys` of `source` (runtime `uuid`), at
// `generations`, with the listing's sequence `listed`, under a caller
// deadline of `deadline_ms`.
inline peer::ItemResults PullOn(const Node& target, const std::string& source,
                                const std::string& uuid, const std::vector<std::string>& keys,
                                const std::vector<uint64_t>& generations, uint64_t listed,
                                int deadline_ms) {
  auto stub =
      peer::Peer::NewStub(grpc::CreateChannel(target.addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  peer::PullRequest req;
  *req.mutable_caller() = CallerFor(target);
  req.set_tenant(std::string(kDefaultTenant));
  req.set_source(source);
  req.set_source_uuid(uuid);
  for (const std::string& k : keys) req.add_keys(k);
  for (uint64_t g : generations) req.add_generations(g);
  req.set_listed_sequence(listed);
  peer::ItemResults out;
  const grpc::Status st = stub->Pull(&ctx, req, &out);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(out.items_size(), static_cast<int>(keys.size()));
  return out;
}

}  // namespace tierkv::cluster_test

#endif  // TIERKV_TESTS_DRAIN_UTIL_H_
