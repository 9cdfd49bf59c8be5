// The on-disk header of one SSD blob (docs/ssd-format.md).
//
// A blob is a 4 KiB header block followed by the value, padded to 4 KiB. The
// header names the object (tenant, key, group), its size, an xxh3-64 checksum
// of the value, and a generation (newest wins when recovery finds a key twice);
// it carries an xxh3-64 checksum of itself. The header is written after the
// value and zeroed when the blob is freed, so a restart finds only blobs whose
// write completed and that were not removed.
#ifndef TIERKV_MEDIA_SSD_BLOB_H_
#define TIERKV_MEDIA_SSD_BLOB_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "media/checksum.h"  // the value checksum the header carries
#include "tierkv/status.h"

namespace tierkv {

inline constexpr uint32_t kBlobMagic = 0x424B5654;  // bytes "TVKB"
inline constexpr uint16_t kBlobVersion = 1;
inline constexpr size_t kBlobHeaderBytes = 4096;
inline constexpr size_t kBlobFixedBytes = 48;               // fields before the names
inline constexpr uint64_t kMaxBlobValueBytes = 1ull << 40;  // a sane bound for one value

struct BlobHeader {
  std::string tenant;
  std::string key;
  std::string group_id;
  uint64_t size = 0;            // value bytes
  uint64_t value_checksum = 0;  // xxh3-64 of the value
  uint64_t generation = 0;
};

// The header as exactly kBlobHeaderBytes bytes. INVALID_ARGUMENT when the names
// do not fit (tenant + key + group > 4048 bytes, or any over 65535), or the
// size is 0 or over kMaxBlobValueBytes.
Result<std::string> EncodeBlobHeader(const BlobHeader& h);
// Whether `h` can be encoded: the errors of EncodeBlobHeader.
Status CheckBlobHeader(const BlobHeader& h);
// Encodes `h`, which CheckBlobHeader accepted, into the kBlobHeaderBytes bytes
// at `block` (a writer's own aligned buffer).
void EncodeBlobHeaderInto(const BlobHeader& h, char* block);

// NOT_FOUND for a block that starts no blob (no magic: free space, a freed
// blob, the inside of a value); PROTOCOL_ERROR naming what is wrong for a block
// with the magic that is not a valid header (version, checksum, lengths).
Result<BlobHeader> DecodeBlobHeader(std::string_view block);

// Bytes a blob of `value_size` bytes occupies: header + value rounded to 4 KiB.
uint64_t BlobFootprint(uint64_t value_size);

}  // namespace tierkv

#endif  // TIERKV_MEDIA_SSD_BLOB_H_
