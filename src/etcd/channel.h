// Internal to src/etcd: one endpoint's gRPC channel and stubs, and the helpers
// the client and its streams share. Includes the generated code; nothing
// outside src/etcd includes this.
#ifndef TIERKV_ETCD_CHANNEL_H_
#define TIERKV_ETCD_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "etcd/etcd_client.h"
#include "rpc.grpc.pb.h"
#include "v3election.grpc.pb.h"

namespace tierkv::etcd {

struct Client::Channel {
  size_t index = 0;
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<v3electionpb::Election::Stub> election;
};

inline std::chrono::system_clock::time_point DeadlineIn(int64_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// Streams must only be served by a member that has a leader; etcd answers
// such a stream with an error when its member loses the leader, instead of
// leaving it silent.
inline void RequireLeader(grpc::ClientContext& ctx) { ctx.AddMetadata("hasleader", "true"); }

// Opens the context of a stream its owner (LeaseKeeper, Watcher) can cancel
// from Stop(): registers `ctx` in `slot` under `mu`, unless the owner is
// stopping (`stopping`, read under `mu`) or the client is shut down (false).
inline bool AttachStream(std::mutex& mu, const bool& stopping, const Client& client, void*& slot,
                         grpc::ClientContext* ctx) {
  RequireLeader(*ctx);
  std::lock_guard<std::mutex> lock(mu);
  if (stopping || client.cancelled()) return false;
  slot = ctx;
  return true;
}

inline KeyValue FromProto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

}  // namespace tierkv::etcd

#endif  // TIERKV_ETCD_CHANNEL_H_
