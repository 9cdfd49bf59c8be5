// ClusterIndexAdapter: the global index, the inventory streams' counters and the
// membership revision, seen through http/'s ClusterIndexView.
//
// Thread-safety: thread-safe (everything it reads is).
#ifndef TIERKV_CLUSTER_CLUSTER_INDEX_H_
#define TIERKV_CLUSTER_CLUSTER_INDEX_H_

#include "cluster/global_index.h"
#include "cluster/ha_state.h"
#include "cluster/inventory.h"

namespace tierkv {

class ClusterIndexAdapter final : public ClusterIndexView {
 public:
  ClusterIndexAdapter(const GlobalIndex* index, const Inventory* inventory,
                      const HaStateProvider* membership)
      : index_(index), inventory_(inventory), membership_(membership) {}
  CoverageView Coverage() const override;
  std::vector<RemoteBlobView> Locate(const std::string& tenant,
                                     const std::string& key) const override;
  uint64_t OwnerWatermark(const std::string& owner) const override {
    return index_->Watermark(owner);
  }
  // The canonical digest of the scope this manager subscribes with.
  static std::string ScopeDigest(const std::string& kind);

 private:
  const GlobalIndex* const index_;
  const Inventory* const inventory_;
  const HaStateProvider* const membership_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_CLUSTER_INDEX_H_
