// The measured runs of tierkv_bench: single puts and gets of one size from N
// client threads, and batched 4 KiB exist/get from N threads, each thread with
// its own client (and, for the memcached peer, its own connection).
#ifndef TIERKV_BENCH_BENCH_RUNS_H_
#define TIERKV_BENCH_BENCH_RUNS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "media/dram_pool.h"

namespace tierkv::bench {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;

// A large, pre-faulted buffer whose slots rotate so copies miss the cache.
class Slab {
 public:
  // Private memory, as a client's buffers are; or, with `like_pool`, a
  // DramPool asking for huge pages as the manager's does (the kernel's shmem
  // policy decides the page size for both).
  explicit Slab(bool like_pool = false);
  ~Slab();
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  char* Slot(uint64_t i, uint64_t size) const;

 private:
  char* base_ = nullptr;
  std::unique_ptr<DramPool> pool_;  // with like_pool
};

// The reply spin cap of every tierkv client the runs open
// (ClientOptions::spin_us); negative: the client's default.
void SetClientSpinUs(int spin_us);
// Every tierkv client the bench opens gets under read leases
// (ClientOptions::lease_free_reads off).
void SetClientLeaseReads(bool leases);

// Single-thread memcpy between different slots of two slabs.
Series MemcpyBaseline(uint64_t size, uint64_t count);

// `threads` clients, each putting then getting `count` objects of `size`
// ("tierkv <label> put" / "get"); with `pipelined` the clients pipeline their
// commits and only the put series is kept ("tierkv <label> put pipelined").
void RunTierkv(const std::string& address, const std::string& label, uint64_t size, uint64_t count,
               int threads, bool pipelined, std::vector<Series>* out);

// Batched 4 KiB lookups: the keys are stored once by PreloadBatchKeys (thread
// t owns "s/<t>/<i>", i < count, in tenant "batch"); each run has `threads`
// clients go `passes` times over their own keys, `batch` per call.
inline constexpr uint64_t kBatchValueBytes = 4 * kKiB;
bool PreloadBatchKeys(const std::string& address, int threads, uint64_t count);
void RunBatched(const std::string& address, uint64_t count, size_t batch, int threads, int passes,
                std::vector<Series>* out);

// The same over memcached meta commands (mg pipelined `batch` per write):
// thread t owns "key:%012d" for t * count <= i < (t + 1) * count.
bool PreloadMemcached(const std::string& socket, uint64_t keys, uint64_t size);
void RunMemcachedBatched(const std::string& socket, uint64_t count, size_t batch, int threads,
                         int passes, std::vector<Series>* out);
// Single sets then gets over one connection, like the hiredis series;
// `warm` overwrites the same keys once first.
bool RunMemcachedSetGet(const std::string& socket, uint64_t size, uint64_t count, bool warm,
                        Series* put, Series* get);

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_BENCH_RUNS_H_
