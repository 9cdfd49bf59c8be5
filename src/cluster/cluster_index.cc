#include "cluster/cluster_index.h"

namespace tierkv {

CoverageView ClusterIndexAdapter::Coverage() const {
  CoverageView v;
  v.enabled = true;
  v.scope_kind = scope_kind_;
  v.scope_digest = ScopeDigest(scope_kind_, scope_namespaces_);
  v.namespace_count = scope_namespaces_.size();
  v.membership_revision = static_cast<int64_t>(membership_->Get().view_version);
  const IndexStats s = index_->Stats();
  v.expected = s.expected;
  v.complete = s.complete;
  v.staging = s.staging;
  v.partial = s.partial;
  v.missing = s.missing;
  v.complete_coverage = s.complete == s.expected;
  v.entries = s.entries;
  v.index_bytes = s.bytes;
  v.index_budget = s.budget;
  v.installs = s.installs;
  v.resets = s.resets;
  v.refused_budget = s.refused_budget;
  v.rejected_views = s.rejected_views;
  const InventoryStats is = inventory_->Stats();
  v.streams_out = is.streams_out;
  v.stream_failures = is.stream_failures;
  v.stalls = is.stalls;
  v.frames_in = is.frames_in;
  v.frames_out = is.frames_out;
  v.bytes_in = is.bytes_in;
  v.bytes_out = is.bytes_out;
  v.snapshots_out = is.snapshots_out;
  v.resets_out = is.resets_out;
  v.replaced_out = is.replaced_out;
  v.refused_out = is.refused_out;
  v.delta_buffer_bytes = is.delta_buffer_bytes;
  return v;
}

std::vector<RemoteBlobView> ClusterIndexAdapter::Locate(const std::string& tenant,
                                                        const std::string& key) const {
  std::vector<RemoteBlobView> out;
  for (const RemoteLocation& l : index_->Lookup(tenant, key).locations) {
    out.push_back({l.owner, l.rank, static_cast<int>(l.medium), l.size, l.generation, l.complete});
  }
  return out;
}

}  // namespace tierkv
