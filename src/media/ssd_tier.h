// SsdTier: blobs in one preallocated file, with crash-safe recovery.
//
// What it does: places blobs (header + value, docs/ssd-format.md) in extents of
// a BlockFile handed out by an OffsetAllocator; hands the value to the kernel
// first and the header (with the value's checksum) after it, both in flight
// together; verifies the value checksum on every read, so a header that landed
// without its value is never served; zeroes the header when a blob is freed, so
// a removed object never comes back after a restart.
//
// Recovery (Open) scans the file from the start: a valid header makes a blob
// (its extent is reserved and the scan jumps past it); an empty block is
// skipped; a bad header (torn, corrupt, or a blob that would run past the end)
// is counted and skipped. When a key was found twice, the newest generation
// wins and the older copy is freed. Values are not read during the scan; their
// checksums are verified when they are read.
//
// Costs: one value write and one 4 KiB header write per blob, in flight
// together (one device round trip); a 4 KiB write per
// free; the scan reads the file in 1 MiB chunks, skipping blob bodies.
//
// Thread-safety: all methods are thread-safe (the allocator and the BlockFile
// are; generation numbers are atomic).
#ifndef TIERKV_MEDIA_SSD_TIER_H_
#define TIERKV_MEDIA_SSD_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "media/block_file.h"
#include "media/offset_allocator.h"
#include "media/ssd_blob.h"
#include "tierkv/status.h"

namespace tierkv {

struct SsdBlob {
  Extent extent;  // where the blob (header first) lives in the file
  BlobHeader header;
};

struct SsdRecoveryStats {
  uint64_t blobs = 0;       // valid blobs recovered
  uint64_t bytes = 0;       // their value bytes
  uint64_t corrupt = 0;     // bad headers dropped
  uint64_t duplicates = 0;  // older copies of a key freed
};

class SsdTier {
 public:
  // Takes the file, recovers what it holds into *recovered.
  // Errors: IO_ERROR when the scan cannot read the file.
  static Result<std::unique_ptr<SsdTier>> Open(std::unique_ptr<BlockFile> file,
                                               std::vector<SsdBlob>* recovered,
                                               SsdRecoveryStats* stats);

  // Writes a blob whose value is `value` (`h.size` bytes; `value` must be 4 KiB
  // aligned with at least `h.size` rounded up to 4 KiB readable bytes, as a DRAM
  // pool extent is). Fills the header's checksum and generation.
  // NO_SPACE when no extent is free; IO_ERROR when writing fails (the header
  // block, which may have landed, is zeroed and the extent released again; it
  // stays out of reuse when even the zeroing fails); INVALID_ARGUMENT for
  // names that do not fit a header.
  Result<SsdBlob> Write(BlobHeader h, const void* value);

  // Reads the value of `blob` into `dst` (4 KiB aligned, `blob.header.size`
  // rounded up to 4 KiB writable bytes) and verifies its checksum.
  // PROTOCOL_ERROR on a checksum mismatch (the caller must drop the blob);
  // IO_ERROR on a failed read.
  Status Read(const SsdBlob& blob, void* dst);

  // Zeroes the header and releases the extent. IO_ERROR when the header cannot
  // be cleared (the extent is then kept out of reuse).
  Status Free(const SsdBlob& blob);

  AllocatorStats Stats() const { return allocator_.Stats(); }
  BlockFile& file() { return *file_; }

 private:
  explicit SsdTier(std::unique_ptr<BlockFile> file);
  Status Recover(std::vector<SsdBlob>* recovered, SsdRecoveryStats* stats);

  std::unique_ptr<BlockFile> file_;
  OffsetAllocator allocator_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_SSD_TIER_H_
