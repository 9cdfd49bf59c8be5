// The store's own families for /metrics, beyond the contract's: the DRAM
// allocator's state and, when an SSD tier is attached, the tier's. (The
// contract's memcache_* families built on the same figures are rendered by
// http/metrics_text.cc.)
#ifndef TIERKV_STORE_STORE_METRICS_H_
#define TIERKV_STORE_STORE_METRICS_H_

#include "common/metric_sink.h"
#include "store/store_types.h"

namespace tierkv {

// Reports the tierkv_dram_* and tierkv_ssd_* families of `stats` (one
// StoreAdmin::Stats() snapshot, the one the contract's families were
// rendered from).
void ReportStoreMetrics(const StoreStats& stats, MetricSink& sink);

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_METRICS_H_
