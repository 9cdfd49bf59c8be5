// REST routes of cluster mode: /cluster/members and the global index's
// coverage (/cache/metadata, /cache/sync, /cache/metadata/await).
#include <chrono>

#include "common/bounded_count.h"
#include "http/rest_reply.h"
#include "http/rest_router.h"

namespace tierkv {

using namespace rest_reply;

namespace {
constexpr int kMaxAwaits = 2;  // of the gate's 4 workers
}  // namespace

void RestServer::ClusterRoutes() {
  ClusterIndexView* index = deps_.cluster_index;
  HaStateProvider* ha = deps_.ha;
  Store* store = deps_.store;
  const ClusterView me = ha->Members();
  const std::string self = me.node_id;  // fixed for the process (not the runtime UUID)
  http_->Get("/cluster/members", [ha](const httplib::Request&, httplib::Response& res) {
    const ClusterView v = ha->Members();
    Json j;
    j["mode"] = v.enabled ? "cluster" : "standalone";
    j["cluster"] = v.cluster;
    j["node_id"] = v.node_id;
    j["revision"] = v.revision;
    Json members = Json::array();
    for (const MemberView& m : v.members) {
      char since[32] = {};
      const time_t secs = static_cast<time_t>(m.since_unix_ms / 1000);
      struct tm utc {};
      gmtime_r(&secs, &utc);
      strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &utc);
      members.push_back({{"node_id", m.node_id},
                         {"rank", m.rank},
                         {"endpoint", m.endpoint},
                         {"data_endpoint", m.data_endpoint},
                         {"rest_url", m.rest_url},
                         {"runtime_uuid", m.runtime_uuid},
                         {"incarnation", m.incarnation},
                         {"epoch", m.epoch},
                         {"stream_protocol", m.stream_protocol},
                         {"since", since},
                         {"since_ms", m.since_unix_ms}});
    }
    j["members"] = members;
    SendJson(res, j);
  });

  auto standalone = [](httplib::Response& res) {
    SendError(res, "not in cluster mode (no --etcd-endpoints)");
  };
  http_->Get("/cache/metadata", [=](const httplib::Request&, httplib::Response& res) {
    if (index == nullptr) return standalone(res);
    const CoverageView v = index->Coverage();
    Json j;
    j["node_id"] = self;
    j["scope_kind"] = v.scope_kind;
    j["scope_digest"] = v.scope_digest;
    j["namespace_count"] = v.namespace_count;
    j["membership_revision"] = v.membership_revision;
    j["coverage"] = v.complete_coverage ? "complete" : "incomplete";
    j["owner_views"] = {{"expected", v.expected},
                        {"complete", v.complete},
                        {"staging", v.staging},
                        {"partial", v.partial},
                        {"missing", v.missing}};
    j["index"] = {{"entries", v.entries},
                  {"bytes", v.index_bytes},
                  {"budget", v.index_budget},
                  {"installs", v.installs},
                  {"resets", v.resets},
                  {"refused_budget", v.refused_budget},
                  {"rejected_views", v.rejected_views}};
    j["streams"] = {{"owner_streams_open", v.streams_out},
                    {"snapshots_served", v.snapshots_out},
                    {"resets_sent", v.resets_out},
                    {"owner_streams_replaced", v.replaced_out},
                    {"owner_streams_refused", v.refused_out},
                    {"requester_failures", v.stream_failures},
                    {"requester_stalls", v.stalls},
                    {"frames_in", v.frames_in},
                    {"frames_out", v.frames_out},
                    {"bytes_in", v.bytes_in},
                    {"bytes_out", v.bytes_out},
                    {"delta_buffer_bytes", v.delta_buffer_bytes}};
    SendJson(res, j);
  });
  http_->Post("/cache/sync", [=](const httplib::Request&, httplib::Response& res) {
    if (index == nullptr) return standalone(res);
    // This incarnation's: a manager that joined again after a fence has a
    // new runtime UUID and epoch.
    const uint64_t self_epoch = ha->Epoch();  // set once registered
    const std::string self_uuid = ha->Members().runtime_uuid;
    Json j;
    j["success"] = true;
    j["inventory_fence"] = {{"owner", self},
                            {"sequence", store->feed().last_sequence()},
                            {"runtime_uuid", self_uuid},
                            {"epoch", self_epoch}};
    j["scope_digest"] = index->Coverage().scope_digest;
    SendJson(res, j);
  });
  http_->Post("/cache/metadata/await", [=](const httplib::Request& req, httplib::Response& res) {
    if (index == nullptr) return standalone(res);
    const Json body = Json::parse(req.body, nullptr, false);
    const Json fence = body.is_object() ? body.value("inventory_fence", Json()) : Json();
    if (!fence.is_object() || !fence.value("owner", Json()).is_string() ||
        !fence.value("sequence", Json()).is_number_unsigned() ||
        !fence.value("runtime_uuid", Json("")).is_string() ||
        !fence.value("epoch", Json(0u)).is_number_unsigned()) {
      return SendError(res,
                       "body must be {\"inventory_fence\":{\"owner\":S,\"sequence\":N,"
                       "\"runtime_uuid\":S,\"epoch\":N},\"scope_digest\":S,\"timeout_ms\":N}");
    }
    const FenceOwner owner{fence["owner"], fence.value("runtime_uuid", ""),
                           fence.value("epoch", uint64_t{0})};
    const uint64_t sequence = fence["sequence"];
    const std::string digest = body.value("scope_digest", "");
    const CoverageView v = index->Coverage();
    if (!digest.empty() && digest != v.scope_digest) {
      return SendError(res, "scope mismatch: this manager's scope digest is " + v.scope_digest +
                                ", the fence was taken for " + digest);
    }
    int64_t timeout_ms = 5000;
    if (body.contains("timeout_ms")) {
      if (!body["timeout_ms"].is_number_unsigned() || body["timeout_ms"].get<uint64_t>() > 30000) {
        return SendError(res, "timeout_ms must be an integer from 0 to 30000");
      }
      timeout_ms = body["timeout_ms"].get<int64_t>();
    }
    // A waiting request holds a REST worker: at most kMaxAwaits wait at once,
    // so awaits can never take every worker from the other REST clients.
    static BoundedCount waiting(kMaxAwaits);
    const std::optional<BoundedCount::Slot> slot = waiting.TryEnter();
    if (!slot) {
      return SendError(res, "too many awaits in progress (at most " + std::to_string(kMaxAwaits) +
                                "); retry later");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    FenceSeen seen;
    if (owner.node == self) {  // this manager's own feed: woken by its changes
      const uint64_t self_epoch = ha->Epoch();
      const std::string self_uuid = ha->Members().runtime_uuid;
      seen.view_uuid = self_uuid;
      seen.current = true;
      seen.epoch = self_epoch;
      // A fence of another incarnation of this node is an earlier one's.
      seen.retired = (!owner.uuid.empty() && owner.uuid != self_uuid) ||
                     (owner.epoch != 0 && owner.epoch < self_epoch);
      for (seen.covered = store->feed().last_sequence(); !seen.retired && *seen.covered < sequence;
           seen.covered = store->feed().last_sequence()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        (void)store->feed().WaitAfter(*seen.covered, left.count());
      }
    } else {  // the installed view of a peer: woken by its installs and deltas
      seen = index->AwaitOwner(owner, sequence, timeout_ms);
    }
    if (Status st = FenceOutcome(owner, sequence, seen); !st.ok()) {
      return SendError(res, st.message());
    }
    Json j;
    j["success"] = true;
    j["owner"] = owner.node;
    j["covered_sequence"] = *seen.covered;
    j["runtime_uuid"] = seen.view_uuid;
    SendJson(res, j);
  });
}

}  // namespace tierkv
