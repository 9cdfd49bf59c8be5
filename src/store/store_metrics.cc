#include "store/store_metrics.h"

namespace tierkv {
namespace {

constexpr MetricFamily kDramFragmentation{
    "tierkv_dram_fragmentation_ratio", "gauge",
    "DRAM pool external fragmentation: 1 - largest free range / free bytes"};
constexpr MetricFamily kDramLargestFree{"tierkv_dram_largest_free_bytes", "gauge",
                                        "Largest free range of the DRAM pool in bytes"};
constexpr MetricFamily kDramFreeRanges{"tierkv_dram_free_ranges", "gauge",
                                       "Number of free ranges in the DRAM pool"};
constexpr MetricFamily kDramRequested{
    "tierkv_dram_requested_bytes", "gauge",
    "Bytes of live values in the DRAM pool before size-class rounding"};
constexpr MetricFamily kSsdInfo{
    "tierkv_ssd_info", "gauge",
    "SSD tier I/O engine (io_uring or pread) and whether O_DIRECT is on"};
constexpr MetricFamily kSsdObjects{"tierkv_ssd_objects", "gauge", "Objects with a replica on SSD"};
constexpr MetricFamily kSsdDemoted{"tierkv_ssd_demoted_total", "counter",
                                   "DRAM replicas dropped with an SSD replica kept (demotions)"};
constexpr MetricFamily kSsdFlushFailed{"tierkv_ssd_flush_failed_total", "counter",
                                       "SSD writes that failed (no room or I/O error)"};
constexpr MetricFamily kSsdEvicted{"tierkv_ssd_evicted_total", "counter", "SSD replicas evicted"};
constexpr MetricFamily kSsdEvictedBytes{"tierkv_ssd_evicted_bytes_total", "counter",
                                        "Bytes of SSD replicas evicted"};
constexpr MetricFamily kSsdIoErrors{"tierkv_ssd_io_errors_total", "counter",
                                    "SSD reads, writes and frees that failed"};
constexpr MetricFamily kSsdCorrupt{"tierkv_ssd_corrupt_blobs_total", "counter",
                                   "SSD replicas dropped because their value failed its checksum"};
constexpr MetricFamily kSsdRecovered{"tierkv_ssd_recovered_blobs", "gauge",
                                     "Objects the start-up scan recovered from SSD"};
constexpr MetricFamily kSsdRecoveryCorrupt{
    "tierkv_ssd_recovery_corrupt_blobs", "gauge",
    "Blob headers the start-up scan found invalid and dropped"};
constexpr MetricFamily kSsdPrefetch{"tierkv_ssd_prefetch_scheduled_total", "counter",
                                    "Rewarms scheduled by prefetch requests"};
constexpr MetricFamily kSsdPaused{
    "tierkv_ssd_writes_paused", "gauge",
    "1 while SSD writes are paused after an I/O error (demotion drops)"};
constexpr MetricFamily kSsdPauses{"tierkv_ssd_write_pauses_total", "counter",
                                  "Pauses of SSD writes started by I/O errors"};

constexpr MetricFamily kHbmObjects{"tierkv_hbm_objects", "gauge", "Objects with a replica in HBM"};
constexpr MetricFamily kHbmPromoted{"tierkv_hbm_promoted_total", "counter",
                                    "DRAM -> HBM copies made by prefetch requests"};
constexpr MetricFamily kHbmPromotedBytes{"tierkv_hbm_promoted_bytes_total", "counter",
                                         "Bytes copied from DRAM into HBM by prefetch requests"};
constexpr MetricFamily kHbmDemoted{"tierkv_hbm_demoted_total", "counter",
                                   "HBM replicas moved down into DRAM to make room"};
constexpr MetricFamily kHbmDemotedBytes{"tierkv_hbm_demoted_bytes_total", "counter",
                                        "Bytes moved down from HBM into DRAM to make room"};
constexpr MetricFamily kHbmDropped{"tierkv_hbm_dropped_total", "counter",
                                   "HBM replicas dropped with the value kept in DRAM or on SSD"};
constexpr MetricFamily kHbmEvicted{"tierkv_hbm_evicted_total", "counter",
                                   "HBM replicas dropped with no copy below (the value is gone)"};
constexpr MetricFamily kHbmWarmed{"tierkv_hbm_warmed_total", "counter",
                                  "HBM -> DRAM copies made for host reads"};
constexpr MetricFamily kHbmWarmedBytes{"tierkv_hbm_warmed_bytes_total", "counter",
                                       "Bytes copied from HBM into DRAM for host reads"};
constexpr MetricFamily kHbmGetHits{"tierkv_hbm_get_hits_total", "counter",
                                   "Gets of values held only in HBM (served after a copy down)"};
constexpr MetricFamily kHbmDeviceReads{
    "tierkv_hbm_device_reads_total", "counter",
    "Gets answered from HBM to a client that copies GPU to GPU (read leases on HBM replicas)"};
constexpr MetricFamily kHbmDevicePuts{"tierkv_hbm_device_puts_total", "counter",
                                      "Values put straight into HBM by clients copying from a GPU"};
constexpr MetricFamily kHbmCopyFailures{"tierkv_hbm_copy_failures_total", "counter",
                                        "Copies to or from a GPU that failed"};

void ReportSsdMetrics(const TierStats& t, MetricSink& sink) {
  sink.Family(kSsdInfo);
  sink.Sample(
      kSsdInfo.name,
      MetricLabel("engine", t.engine) + "," + MetricLabel("direct", t.direct ? "true" : "false"),
      1);
  sink.One(kSsdObjects, t.ssd_objects);
  sink.One(kSsdDemoted, t.demoted);
  sink.One(kSsdFlushFailed, t.flush_failed);
  sink.One(kSsdEvicted, t.ssd_evicted_objects);
  sink.One(kSsdEvictedBytes, t.ssd_evicted_bytes);
  sink.One(kSsdIoErrors, t.io_errors);
  sink.One(kSsdCorrupt, t.corrupt_blobs);
  sink.One(kSsdRecovered, t.recovered.blobs);
  sink.One(kSsdRecoveryCorrupt, t.recovered.corrupt);
  sink.One(kSsdPrefetch, t.prefetch_scheduled);
  sink.One(kSsdPaused, t.writes_paused ? 1 : 0);
  sink.One(kSsdPauses, t.write_pauses);
}

void ReportHbmMetrics(const HbmStats& h, MetricSink& sink) {
  sink.One(kHbmObjects, h.objects);
  sink.One(kHbmPromoted, h.promoted);
  sink.One(kHbmPromotedBytes, h.promoted_bytes);
  sink.One(kHbmDemoted, h.demoted);
  sink.One(kHbmDemotedBytes, h.demoted_bytes);
  sink.One(kHbmDropped, h.dropped);
  sink.One(kHbmEvicted, h.evicted);
  sink.One(kHbmWarmed, h.warmed);
  sink.One(kHbmWarmedBytes, h.warmed_bytes);
  sink.One(kHbmGetHits, h.get_hits);
  sink.One(kHbmDeviceReads, h.device_reads);
  sink.One(kHbmDevicePuts, h.device_puts);
  sink.One(kHbmCopyFailures, h.copy_failures);
}

}  // namespace

void ReportStoreMetrics(const StoreStats& s, MetricSink& sink) {
  sink.OneDouble(kDramFragmentation, s.dram.fragmentation);
  sink.One(kDramLargestFree, s.dram.largest_free);
  sink.One(kDramFreeRanges, s.dram.free_ranges);
  sink.One(kDramRequested, s.dram.requested);
  if (s.tier.enabled) ReportSsdMetrics(s.tier, sink);
  if (s.hbm.enabled) ReportHbmMetrics(s.hbm, sink);
}

}  // namespace tierkv
