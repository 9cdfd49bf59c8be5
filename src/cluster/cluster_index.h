// ClusterIndexAdapter: the global index, the inventory streams' counters and the
// membership revision, seen through http/'s ClusterIndexView.
//
// Thread-safety: thread-safe (everything it reads is).
#ifndef TIERKV_CLUSTER_CLUSTER_INDEX_H_
#define TIERKV_CLUSTER_CLUSTER_INDEX_H_

#include "cluster/global_index.h"
#include "cluster/inventory.h"
#include "http/ports/cluster.h"

namespace tierkv {

class ClusterIndexAdapter final : public ClusterIndexView {
 public:
  ClusterIndexAdapter(const GlobalIndex* index, const Inventory* inventory,
                      const HaStateProvider* membership, std::string scope_kind,
                      std::vector<std::string> scope_namespaces)
      : index_(index),
        inventory_(inventory),
        membership_(membership),
        scope_kind_(std::move(scope_kind)),
        scope_namespaces_(std::move(scope_namespaces)) {}
  CoverageView Coverage() const override;
  void ReportMetrics(MetricSink& sink) const override {
    index_->ReportMetrics(sink);
    inventory_->ReportMetrics(sink);
  }
  std::vector<RemoteBlobView> Locate(const std::string& tenant,
                                     const std::string& key) const override;
  FenceSeen AwaitOwner(const FenceOwner& owner, uint64_t sequence,
                       int64_t timeout_ms) const override {
    return index_->AwaitFence(
        owner, sequence, std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
  }

 private:
  const GlobalIndex* const index_;
  const Inventory* const inventory_;
  const HaStateProvider* const membership_;
  const std::string scope_kind_;
  const std::vector<std::string> scope_namespaces_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_CLUSTER_INDEX_H_
