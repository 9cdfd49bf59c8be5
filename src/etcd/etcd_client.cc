#include "etcd/etcd_client.h"

#include <mutex>
#include <set>

#include "etcd/channel.h"

namespace tierkv::etcd {

struct Client::Impl {
  ClientOptions options;
  std::vector<std::shared_ptr<Channel>> channels;
  std::atomic<size_t> current{0};
  mutable std::mutex mu;  // guards active
  std::set<grpc::ClientContext*> active;
  std::atomic<uint64_t> unavailable{0}, timeout{0}, refused{0}, failovers{0};
};

namespace {

// The least time one connection attempt to an endpoint is given (Create).
constexpr int kMinConnectTimeoutMs = 2000;

// "http://host:port" or "host:port" -> "host:port".
Result<std::string> ParseEndpoint(std::string e) {
  if (e.rfind("https://", 0) == 0) {
    return InvalidArgument("etcd endpoint " + e + ": TLS to etcd is not supported; use http://");
  }
  if (e.rfind("http://", 0) == 0) e = e.substr(7);
  while (!e.empty() && e.back() == '/') e.pop_back();
  const size_t colon = e.rfind(':');
  if (e.empty() || colon == std::string::npos || colon == 0 || colon + 1 == e.size() ||
      e.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return InvalidArgument("etcd endpoint '" + e + "' must be host:port or http://host:port");
  }
  return e;
}

Status Refused(const grpc::Status& st, const char* what) {
  const std::string msg = std::string("etcd ") + what + ": " + st.error_message();
  if (st.error_message().find("too large") != std::string::npos ||
      st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return Status(Code::kTooLarge, msg);
  }
  switch (st.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(msg);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return InvalidArgument(msg);
    default:
      return Status(Code::kInternal, msg);
  }
}

void ToProto(const Op& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case Op::kPut: {
      auto* p = out->mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case Op::kDelete: {
      auto* d = out->mutable_request_delete_range();
      d->set_key(op.key);
      if (op.prefix) d->set_range_end(PrefixEnd(op.key));
      break;
    }
    case Op::kGet: {
      auto* r = out->mutable_request_range();
      r->set_key(op.key);
      if (op.prefix) r->set_range_end(PrefixEnd(op.key));
      break;
    }
  }
}

void ToProto(const Compare& c, etcdserverpb::Compare* out) {
  out->set_key(c.key);
  out->set_result(static_cast<etcdserverpb::Compare::CompareResult>(c.result));
  out->set_target(static_cast<etcdserverpb::Compare::CompareTarget>(c.target));
  switch (c.target) {
    case Compare::kVersion:
      out->set_version(c.number);
      break;
    case Compare::kCreate:
      out->set_create_revision(c.number);
      break;
    case Compare::kMod:
      out->set_mod_revision(c.number);
      break;
    case Compare::kValue:
      out->set_value(c.value);
      break;
    case Compare::kLease:
      out->set_lease(c.number);
      break;
  }
}

RangeResult RangeFromProto(const etcdserverpb::RangeResponse& r) {
  RangeResult out;
  out.revision = r.header().revision();
  out.kvs.reserve(r.kvs_size());
  for (const auto& kv : r.kvs()) out.kvs.push_back(FromProto(kv));
  return out;
}

}  // namespace

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Result<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (options.endpoints.empty()) return InvalidArgument("no etcd endpoints given");
  std::unique_ptr<Client> c(new Client());
  c->impl_ = std::make_unique<Impl>();
  c->impl_->options = options;
  c->impl_->options.keepalive_ms = std::max<int64_t>(options.keepalive_ms, 5000);
  for (const std::string& e : options.endpoints) {
    Result<std::string> hostport = ParseEndpoint(e);
    if (!hostport.ok()) return hostport.status();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(c->impl_->options.keepalive_ms));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Reconnect soon after a lost connection (100 ms, backing off to 1 s),
    // but give each attempt time to finish: gRPC also takes the minimum
    // backoff as the least time a connection attempt (TCP and the HTTP/2
    // handshake) may take, and a call made while the first attempt fails
    // fails at once. At 100 ms a manager on a busy host could not reach etcd
    // at start and exited; 2 s stays inside one call attempt (3 s).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(64 << 20);
    auto ch = std::make_shared<Channel>();
    ch->index = c->impl_->channels.size();
    ch->endpoint = *hostport;
    ch->channel = grpc::CreateCustomChannel(*hostport, grpc::InsecureChannelCredentials(), args);
    ch->kv = etcdserverpb::KV::NewStub(ch->channel);
    ch->lease = etcdserverpb::Lease::NewStub(ch->channel);
    ch->watch = etcdserverpb::Watch::NewStub(ch->channel);
    ch->election = v3electionpb::Election::NewStub(ch->channel);
    c->impl_->channels.push_back(std::move(ch));
  }
  return c;
}

Client::~Client() { Cancel(); }

std::shared_ptr<Client::Channel> Client::CurrentChannel() const {
  return impl_->channels[impl_->current.load(std::memory_order_acquire) % impl_->channels.size()];
}

void Client::ReportFailure(const Channel& failed) {
  size_t expected = failed.index;
  const size_t next = (failed.index + 1) % impl_->channels.size();
  if (impl_->channels.size() > 1 && impl_->current.compare_exchange_strong(expected, next)) {
    impl_->failovers.fetch_add(1, std::memory_order_relaxed);
  }
}

int64_t Client::keepalive_ms() const { return impl_->options.keepalive_ms; }
const std::vector<std::string>& Client::endpoints() const { return impl_->options.endpoints; }

void Client::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (grpc::ClientContext* ctx : impl_->active) ctx->TryCancel();
}

ClientStats Client::Stats() const {
  ClientStats s;
  if (!impl_) return s;
  s.unavailable = impl_->unavailable.load(std::memory_order_relaxed);
  s.timeout = impl_->timeout.load(std::memory_order_relaxed);
  s.refused = impl_->refused.load(std::memory_order_relaxed);
  s.failovers = impl_->failovers.load(std::memory_order_relaxed);
  return s;
}

namespace {

// Runs `fn(channel, context)` on the current endpoint, failing over to the
// next one on UNAVAILABLE or a passed deadline (when `failover_on_deadline`),
// each endpoint at most once.
template <typename Fn>
Status Call(Client& client, Client::Impl& impl, const char* what, int64_t timeout_ms,
            bool failover_on_deadline, Fn&& fn) {
  std::string last = "no attempt";
  for (size_t attempt = 0; attempt < impl.channels.size(); ++attempt) {
    if (client.cancelled()) return Status(Code::kUnavailable, "etcd client is shut down");
    std::shared_ptr<Client::Channel> ch = client.CurrentChannel();
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(timeout_ms));
    {
      std::lock_guard<std::mutex> lock(impl.mu);
      impl.active.insert(&ctx);
    }
    grpc::Status st = fn(*ch, ctx);
    {
      std::lock_guard<std::mutex> lock(impl.mu);
      impl.active.erase(&ctx);
    }
    if (st.ok()) return Status::Ok();
    const bool deadline = st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (deadline) impl.timeout.fetch_add(1, std::memory_order_relaxed);
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        st.error_code() == grpc::StatusCode::CANCELLED || deadline) {
      last = ch->endpoint + ": " + st.error_message();
      if (deadline && !failover_on_deadline) break;
      client.ReportFailure(*ch);
      continue;
    }
    impl.refused.fetch_add(1, std::memory_order_relaxed);
    return Refused(st, what);
  }
  impl.unavailable.fetch_add(1, std::memory_order_relaxed);
  return Status(Code::kUnavailable, std::string("etcd ") + what + ": unavailable (" + last + ")");
}

}  // namespace

Result<RangeResult> Client::Get(const std::string& key, bool prefix) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(PrefixEnd(key));
  etcdserverpb::RangeResponse resp;
  Status st =
      Call(*this, *impl_, "range", impl_->options.call_timeout_ms, true,
           [&](Channel& ch, grpc::ClientContext& ctx) { return ch.kv->Range(&ctx, req, &resp); });
  if (!st.ok()) return st;
  return RangeFromProto(resp);
}

Result<int64_t> Client::Put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  Status st =
      Call(*this, *impl_, "put", impl_->options.call_timeout_ms, true,
           [&](Channel& ch, grpc::ClientContext& ctx) { return ch.kv->Put(&ctx, req, &resp); });
  if (!st.ok()) return st;
  return resp.header().revision();
}

Result<int64_t> Client::Delete(const std::string& key, bool prefix) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(PrefixEnd(key));
  etcdserverpb::DeleteRangeResponse resp;
  Status st = Call(
      *this, *impl_, "delete", impl_->options.call_timeout_ms, true,
      [&](Channel& ch, grpc::ClientContext& ctx) { return ch.kv->DeleteRange(&ctx, req, &resp); });
  if (!st.ok()) return st;
  return resp.deleted();
}

Result<TxnResult> Client::Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                              const std::vector<Op>& failure) {
  etcdserverpb::TxnRequest req;
  for (const Compare& c : compares) ToProto(c, req.add_compare());
  for (const Op& op : success) ToProto(op, req.add_success());
  for (const Op& op : failure) ToProto(op, req.add_failure());
  etcdserverpb::TxnResponse resp;
  Status st =
      Call(*this, *impl_, "txn", impl_->options.call_timeout_ms, true,
           [&](Channel& ch, grpc::ClientContext& ctx) { return ch.kv->Txn(&ctx, req, &resp); });
  if (!st.ok()) return st;
  TxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (const auto& r : resp.responses()) {
    if (r.has_response_range()) out.gets.push_back(RangeFromProto(r.response_range()));
  }
  return out;
}

Status Client::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  etcdserverpb::CompactionResponse resp;
  return Call(
      *this, *impl_, "compact", impl_->options.call_timeout_ms, true,
      [&](Channel& ch, grpc::ClientContext& ctx) { return ch.kv->Compact(&ctx, req, &resp); });
}

Result<LeaseGrant> Client::GrantLease(int64_t ttl_secs) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_secs);
  etcdserverpb::LeaseGrantResponse resp;
  Status st = Call(*this, *impl_, "lease grant", impl_->options.call_timeout_ms, true,
                   [&](Channel& ch, grpc::ClientContext& ctx) {
                     return ch.lease->LeaseGrant(&ctx, req, &resp);
                   });
  if (!st.ok()) return st;
  if (!resp.error().empty()) return Status(Code::kInternal, "etcd lease grant: " + resp.error());
  return LeaseGrant{resp.id(), resp.ttl()};
}

Status Client::RevokeLease(int64_t id) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(id);
  etcdserverpb::LeaseRevokeResponse resp;
  return Call(*this, *impl_, "lease revoke", impl_->options.call_timeout_ms, true,
              [&](Channel& ch, grpc::ClientContext& ctx) {
                return ch.lease->LeaseRevoke(&ctx, req, &resp);
              });
}

Result<LeaderKey> Client::Campaign(const std::string& name, int64_t lease, const std::string& value,
                                   int64_t timeout_ms) {
  v3electionpb::CampaignRequest req;
  req.set_name(name);
  req.set_lease(lease);
  req.set_value(value);
  v3electionpb::CampaignResponse resp;
  Status st = Call(*this, *impl_, "campaign", timeout_ms, /*failover_on_deadline=*/false,
                   [&](Channel& ch, grpc::ClientContext& ctx) {
                     return ch.election->Campaign(&ctx, req, &resp);
                   });
  if (!st.ok()) return st;
  const auto& l = resp.leader();
  return LeaderKey{l.name(), l.key(), l.rev(), l.lease()};
}

Status Client::Resign(const LeaderKey& leader) {
  v3electionpb::ResignRequest req;
  auto* l = req.mutable_leader();
  l->set_name(leader.name);
  l->set_key(leader.key);
  l->set_rev(leader.rev);
  l->set_lease(leader.lease);
  v3electionpb::ResignResponse resp;
  return Call(
      *this, *impl_, "resign", impl_->options.call_timeout_ms, true,
      [&](Channel& ch, grpc::ClientContext& ctx) { return ch.election->Resign(&ctx, req, &resp); });
}

Result<std::optional<KeyValue>> Client::Leader(const std::string& name) {
  v3electionpb::LeaderRequest req;
  req.set_name(name);
  v3electionpb::LeaderResponse resp;
  Status st = Call(
      *this, *impl_, "leader", impl_->options.call_timeout_ms, true,
      [&](Channel& ch, grpc::ClientContext& ctx) { return ch.election->Leader(&ctx, req, &resp); });
  if (st.code() == Code::kNotFound ||
      (!st.ok() && st.message().find("no leader") != std::string::npos)) {
    return std::optional<KeyValue>();
  }
  if (!st.ok()) return st;
  return std::optional<KeyValue>(FromProto(resp.kv()));
}

}  // namespace tierkv::etcd
