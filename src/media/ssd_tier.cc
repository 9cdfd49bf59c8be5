#include "media/ssd_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

namespace tierkv {
namespace {

constexpr size_t kScanChunk = 1 << 20;

// Values move in up to kPieces pieces of at least kMinPiece bytes, issued
// together (the device works on several at once; the checksum of one piece is
// computed while the next ones are in flight).
size_t PieceBytes(uint64_t len) {
  constexpr uint64_t kPieces = 4;
  constexpr uint64_t kMinPiece = 256 << 10;
  const uint64_t per = (len / kPieces + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
  return static_cast<size_t>(std::max(kMinPiece, per));
}

// A 4 KiB-aligned heap buffer (O_DIRECT needs aligned memory).
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n)
      : size(n), data(static_cast<char*>(std::aligned_alloc(kBlockAlign, n))) {}
  ~AlignedBuffer() { std::free(data); }
  size_t size;
  char* data;
};

}  // namespace

SsdTier::SsdTier(std::unique_ptr<BlockFile> file)
    : file_(std::move(file)), allocator_(file_->size(), kBlockAlign, /*size_classes=*/false) {}

Result<std::unique_ptr<SsdTier>> SsdTier::Open(std::unique_ptr<BlockFile> file,
                                               std::vector<SsdBlob>* recovered,
                                               SsdRecoveryStats* stats) {
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(file)));
  *stats = SsdRecoveryStats{};
  if (Status st = tier->Recover(recovered, stats); !st.ok()) return st;
  return tier;
}

Status SsdTier::Recover(std::vector<SsdBlob>* recovered, SsdRecoveryStats* stats) {
  const uint64_t size = file_->size();
  AlignedBuffer chunk(kScanChunk);
  uint64_t chunk_at = UINT64_MAX;  // file offset of chunk.data
  uint64_t chunk_len = 0;
  std::map<std::pair<std::string, std::string>, SsdBlob> newest;
  std::vector<SsdBlob> older;
  uint64_t max_generation = 0;
  for (uint64_t off = 0; off + kBlobHeaderBytes <= size;) {
    if (chunk_at == UINT64_MAX || off < chunk_at || off + kBlobHeaderBytes > chunk_at + chunk_len) {
      chunk_at = off;
      chunk_len = std::min<uint64_t>(kScanChunk, size - off);
      if (Status st = file_->Read(chunk_at, chunk.data, chunk_len); !st.ok()) return st;
    }
    Result<BlobHeader> h =
        DecodeBlobHeader(std::string_view(chunk.data + (off - chunk_at), kBlobHeaderBytes));
    if (!h.ok()) {
      if (h.code() != Code::kNotFound) ++stats->corrupt;
      off += kBlobHeaderBytes;
      continue;
    }
    const uint64_t footprint = BlobFootprint(h->size);
    if (off + footprint > size) {  // a header pointing past the end: corrupt
      ++stats->corrupt;
      off += kBlobHeaderBytes;
      continue;
    }
    SsdBlob blob{Extent{off, footprint}, std::move(*h)};
    max_generation = std::max(max_generation, blob.header.generation);
    auto id = std::make_pair(blob.header.tenant, blob.header.key);
    auto it = newest.find(id);
    if (it == newest.end()) {
      newest.emplace(std::move(id), std::move(blob));
    } else if (blob.header.generation > it->second.header.generation) {
      older.push_back(std::move(it->second));
      it->second = std::move(blob);
    } else {
      older.push_back(std::move(blob));
    }
    off += footprint;
  }
  generation_ = max_generation + 1;
  for (const SsdBlob& b : older) {
    allocator_.Reserve(b.extent, b.header.size);
    ++stats->duplicates;
    (void)Free(b);  // zero its header so it stays gone
  }
  for (auto& [id, b] : newest) {
    allocator_.Reserve(b.extent, b.header.size);
    ++stats->blobs;
    stats->bytes += b.header.size;
    recovered->push_back(std::move(b));
  }
  return Status::Ok();
}

Result<SsdBlob> SsdTier::Write(BlobHeader h, const void* value) {
  h.generation = generation_.fetch_add(1, std::memory_order_relaxed);
  if (Status st = CheckBlobHeader(h); !st.ok()) return st;
  const uint64_t footprint = BlobFootprint(h.size);
  std::optional<Extent> extent = allocator_.Allocate(footprint);
  if (!extent) {
    return Status(Code::kNoSpace,
                  "SSD tier full (" + std::to_string(footprint) + " bytes requested)");
  }
  // The value's pieces go first and are checksummed while they are written;
  // the header, which holds the checksum, is handed to the kernel after all of
  // them, while they may still be in flight, so a flush costs one device
  // round trip, not two. A header that lands without its value (power lost
  // meanwhile) fails the value's checksum on the first read.
  AlignedBuffer block(kBlobHeaderBytes);
  const BlockFile::Trailer header{extent->offset, block.data, kBlobHeaderBytes};
  Status st = file_->WriteOverlapped(
      extent->offset + kBlobHeaderBytes, value, footprint - kBlobHeaderBytes,
      PieceBytes(footprint - kBlobHeaderBytes),
      [&] {
        h.value_checksum = ValueChecksum(value, h.size);
        EncodeBlobHeaderInto(h, static_cast<char*>(block.data));  // checked above
      },
      &header);
  if (!st.ok()) {
    // The header may be down: zero it before the extent is reused (Free keeps
    // the extent out of use when even that fails).
    (void)Free(SsdBlob{*extent, h});
    return st;
  }
  return SsdBlob{*extent, std::move(h)};
}

Status SsdTier::Read(const SsdBlob& blob, void* dst) {
  const uint64_t padded = BlobFootprint(blob.header.size) - kBlobHeaderBytes;
  // Pieces are verified while the later ones are still being read.
  ValueHasher hasher;
  uint64_t left = blob.header.size;  // padding is not checksummed
  Status st = file_->ReadPieces(blob.extent.offset + kBlobHeaderBytes, dst, padded,
                                PieceBytes(padded), [&](const char* p, size_t n) {
                                  const size_t take =
                                      static_cast<size_t>(std::min<uint64_t>(n, left));
                                  hasher.Update(p, take);
                                  left -= take;
                                });
  if (!st.ok()) return st;
  if (hasher.Digest() != blob.header.value_checksum) {
    return Status(Code::kProtocolError, "SSD blob at offset " + std::to_string(blob.extent.offset) +
                                            " fails its checksum");
  }
  return Status::Ok();
}

Status SsdTier::Free(const SsdBlob& blob) {
  AlignedBuffer zero(kBlobHeaderBytes);
  std::memset(zero.data, 0, kBlobHeaderBytes);
  if (Status st = file_->Write(blob.extent.offset, zero.data, kBlobHeaderBytes); !st.ok()) {
    return st;  // the stale header must not be reused or resurrected
  }
  allocator_.Free(blob.extent, blob.header.size);
  return Status::Ok();
}

}  // namespace tierkv
