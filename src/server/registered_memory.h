// Registered client memory (docs/protocol.md, "Registered memory"): regions
// of a same-host client's own memory that the manager writes gets into
// directly, so that a get moves the bytes once, from the pool (or the owner's
// data channel) into the memory the engine uses.
//
// A client registers a region by passing a descriptor of it with REGISTER: a
// memfd it created, sealed against shrinking (F_SEAL_SHRINK) and open for
// writing. The manager maps it and writes there only. Anything else (no
// descriptor, another kind of file, a read-only or unsealed memfd, a size
// that differs from the one named) is refused: a region the client could
// shrink would fault the manager's next write into it. A client can thus
// register only memory it holds itself, and a region is known only to the
// session that registered it: its ids mean nothing to any other.
//
// RegisteredMemory is the manager-wide part: the byte budgets, the mapping,
// the counters. SessionRegions is one session's table; its destructor (the
// session's end) unmaps what it holds.
//
// Thread-safety: RegisteredMemory is thread-safe; a SessionRegions is used by
// its session's thread only.
#ifndef TIERKV_SERVER_REGISTERED_MEMORY_H_
#define TIERKV_SERVER_REGISTERED_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/memory_piece.h"
#include "common/metric_sink.h"
#include "tierkv/status.h"

namespace tierkv {

struct RegisteredLimits {
  uint64_t total_bytes = 4ull << 30;    // all sessions together (0: REGISTER refused)
  uint64_t session_bytes = 1ull << 30;  // one session
  size_t session_regions = 16;          // regions one session may hold at once
};

// One mapped region. Unmapped, and its bytes given back to the budget, when
// destroyed.
class RegisteredRegion;

class RegisteredMemory {
 public:
  explicit RegisteredMemory(RegisteredLimits limits) : limits_(limits) {}

  // The files of `fds` (the manager's own shared memory: its pool, the
  // generation table) are refused as regions from now on. Call before
  // serving; not thread-safe with Map.
  void RefuseFilesOf(std::span<const int> fds);

  const RegisteredLimits& limits() const { return limits_; }
  // Checks and maps `fd` (taken: closed here whatever happens), whose file
  // must be `size` bytes, for a session that holds `session_bytes` already.
  // Errors: INVALID_ARGUMENT (not a sealed writable memfd of that size),
  // NO_SPACE (over a budget), IO_ERROR (the mapping failed).
  Result<std::unique_ptr<RegisteredRegion>> Map(int fd, uint64_t size, uint64_t session_bytes);

  // What the gets into registered memory did.
  void CountGet(bool remote, uint64_t bytes);
  void CountRefused() { refused_.fetch_add(1, std::memory_order_relaxed); }
  // Reports the tierkv_registered_* families.
  void ReportMetrics(MetricSink& sink) const;

 private:
  friend class RegisteredRegion;
  const RegisteredLimits limits_;
  std::vector<std::pair<uint64_t, uint64_t>> refused_files_;  // (device, inode)
  std::atomic<uint64_t> bytes_{0}, regions_{0};
  std::atomic<uint64_t> registrations_{0}, refused_{0};
  std::atomic<uint64_t> local_gets_{0}, local_bytes_{0}, remote_gets_{0}, remote_bytes_{0};
};

class RegisteredRegion {
 public:
  RegisteredRegion(RegisteredMemory* owner, uint8_t* base, uint64_t size)
      : owner_(owner), base_(base), size_(size) {}
  ~RegisteredRegion();
  RegisteredRegion(const RegisteredRegion&) = delete;
  RegisteredRegion& operator=(const RegisteredRegion&) = delete;
  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }

 private:
  RegisteredMemory* const owner_;
  uint8_t* const base_;
  const uint64_t size_;
};

class SessionRegions {
 public:
  // `shared` is not owned and outlives this table.
  explicit SessionRegions(RegisteredMemory* shared) : shared_(shared) {}

  // Registers the region of `fd` (taken), of `size` bytes; its id (never 0,
  // never reused by this session). Errors as RegisteredMemory::Map, and
  // NO_SPACE when the session holds limits().session_regions already.
  Result<uint64_t> Register(int fd, uint64_t size);
  // NOT_FOUND when this session holds no region `id`.
  Status Unregister(uint64_t id);
  // The bytes [offset, offset + length) of region `id`. NOT_FOUND: no such
  // region in this session; INVALID_ARGUMENT: outside it.
  Result<MemoryPiece> Resolve(uint64_t id, uint64_t offset, uint64_t length) const;
  RegisteredMemory& shared() const { return *shared_; }
  bool empty() const { return regions_.empty(); }

 private:
  RegisteredMemory* const shared_;
  std::map<uint64_t, std::unique_ptr<RegisteredRegion>> regions_;
  uint64_t next_id_ = 1;
  uint64_t bytes_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_REGISTERED_MEMORY_H_
