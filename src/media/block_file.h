// BlockFile: the I/O seam of the SSD tier. A fixed-size file read and written
// at 4 KiB-aligned offsets, lengths and buffers (so O_DIRECT works).
//
// OpenBlockFile prefers io_uring and falls back to pread/pwrite when the kernel
// (or a sandbox) refuses to create a ring; it opens with O_DIRECT and falls back
// to buffered I/O on file systems that refuse it (tmpfs). engine() and direct()
// say what was chosen. Tests substitute their own BlockFile to inject faults.
//
// Thread-safety: implementations are thread-safe.
#ifndef TIERKV_MEDIA_BLOCK_FILE_H_
#define TIERKV_MEDIA_BLOCK_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv {

inline constexpr size_t kBlockAlign = 4096;

class BlockFile {
 public:
  virtual ~BlockFile() = default;
  // Whole transfers or IO_ERROR (naming the offset and errno's text).
  virtual Status Write(uint64_t offset, const void* data, size_t len) = 0;
  virtual Status Read(uint64_t offset, void* data, size_t len) = 0;
  virtual Status Sync() = 0;

  // A block written once `work` has run (`work` may fill it): the SSD tier's
  // header, which holds the checksum `work` computes.
  struct Trailer {
    uint64_t offset = 0;
    const void* data = nullptr;
    size_t len = 0;
  };
  // Writes `len` bytes in pieces of `piece` bytes (a multiple of 4 KiB) issued
  // together, and runs `work` on the calling thread while they are in flight
  // (the SSD tier checksums the value meanwhile); then, when `then` is not
  // null, writes it too. `then` is handed to the kernel after every piece,
  // but may be written while they still are, and land before them. Returns
  // once everything is done; on an error, any part may have landed. The
  // default writes the pieces, runs `work`, then writes `then`.
  virtual Status WriteOverlapped(uint64_t offset, const void* data, size_t len, size_t piece,
                                 const std::function<void()>& work, const Trailer* then);
  // Reads `len` bytes in pieces of `piece` bytes (a multiple of 4 KiB) issued
  // together, and calls `consume(piece_data, piece_len)` for each piece in
  // order as soon as it and all before it have arrived (the SSD tier verifies
  // the checksum meanwhile). The default reads everything, then consumes.
  virtual Status ReadPieces(uint64_t offset, void* data, size_t len, size_t piece,
                            const std::function<void(const char*, size_t)>& consume);
  virtual uint64_t size() const = 0;
  virtual std::string_view engine() const = 0;  // "io_uring" or "pread"
  virtual bool direct() const = 0;              // opened with O_DIRECT
};

struct BlockFileOptions {
  bool use_io_uring = true;       // false: pread/pwrite only
  bool require_io_uring = false;  // fail instead of falling back to pread/pwrite
  bool use_direct = true;         // false: buffered I/O
};

// Opens (creating if needed) `path`, takes an exclusive lock on it (one
// process per file; waits up to 3 s for a previous holder that is going away)
// and preallocates it to `size` bytes (rounded down to 4 KiB). IO_ERROR naming
// the path when that fails or another process holds it.
Result<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                 const BlockFileOptions& options = {});

}  // namespace tierkv

#endif  // TIERKV_MEDIA_BLOCK_FILE_H_
