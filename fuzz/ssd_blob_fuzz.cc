// Fuzz target: the SSD blob header parser and the recovery scan. The input is
// a blob file image (padded to whole 4 KiB blocks, at most 64 KiB): every block
// is decoded as a header (a valid one must encode back to the same block), then
// the whole image is recovered; recovered blobs must lie inside the file, must
// not overlap, and each key must appear once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "media/mem_block_file.h"
#include "media/ssd_tier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierkv;
  size = std::min<size_t>(size, 64 << 10);
  const size_t blocks = std::max<size_t>(1, (size + kBlobHeaderBytes - 1) / kBlobHeaderBytes);
  auto image = std::make_shared<std::string>(blocks * kBlobHeaderBytes, '\0');
  std::copy(data, data + size, image->begin());

  for (size_t b = 0; b < blocks; ++b) {
    const std::string_view block(image->data() + b * kBlobHeaderBytes, kBlobHeaderBytes);
    Result<BlobHeader> h = DecodeBlobHeader(block);
    if (!h.ok()) {
      if (h.code() != Code::kNotFound && h.status().message().empty()) __builtin_trap();
      continue;
    }
    Result<std::string> again = EncodeBlobHeader(*h);
    if (!again.ok() || *again != block) __builtin_trap();  // decode/encode must round-trip
  }

  std::vector<SsdBlob> blobs;
  SsdRecoveryStats stats;
  auto tier = SsdTier::Open(std::make_unique<MemBlockFile>(image), &blobs, &stats);
  if (!tier.ok()) __builtin_trap();  // an in-memory file never fails to read
  std::map<uint64_t, uint64_t> extents;
  std::map<std::pair<std::string, std::string>, int> keys;
  for (const SsdBlob& blob : blobs) {
    if (blob.extent.offset + blob.extent.size > image->size()) __builtin_trap();
    if (blob.extent.size != BlobFootprint(blob.header.size)) __builtin_trap();
    if (!extents.emplace(blob.extent.offset, blob.extent.size).second) __builtin_trap();
    if (++keys[{blob.header.tenant, blob.header.key}] > 1) __builtin_trap();
  }
  uint64_t end = 0;
  for (const auto& [offset, len] : extents) {
    if (offset < end) __builtin_trap();  // overlapping blobs
    end = offset + len;
  }
  if (stats.blobs != blobs.size()) __builtin_trap();
  return 0;
}
