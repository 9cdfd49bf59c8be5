#include "media/ssd_blob.h"

#include <xxhash.h>

#include <cstring>

namespace tierkv {
namespace {

template <typename T>
void Put(char* b, size_t at, T v) {
  std::memcpy(b + at, &v, sizeof(T));
}

template <typename T>
T Get(std::string_view b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

uint64_t HeaderChecksum(std::string_view block) {
  return XXH3_64bits(block.data() + 16, kBlobHeaderBytes - 16);
}

}  // namespace

uint64_t BlobFootprint(uint64_t value_size) {
  return kBlobHeaderBytes +
         (value_size + kBlobHeaderBytes - 1) / kBlobHeaderBytes * kBlobHeaderBytes;
}

Status CheckBlobHeader(const BlobHeader& h) {
  if (h.size == 0 || h.size > kMaxBlobValueBytes) {
    return InvalidArgument("blob value size " + std::to_string(h.size) + " out of range");
  }
  const size_t names = h.tenant.size() + h.key.size() + h.group_id.size();
  if (names > kBlobHeaderBytes - kBlobFixedBytes || h.tenant.size() > 0xFFFF ||
      h.key.size() > 0xFFFF || h.group_id.size() > 0xFFFF) {
    return InvalidArgument("tenant, key and group take " + std::to_string(names) +
                           " bytes; an SSD blob header holds " +
                           std::to_string(kBlobHeaderBytes - kBlobFixedBytes));
  }
  return Status::Ok();
}

Result<std::string> EncodeBlobHeader(const BlobHeader& h) {
  if (Status st = CheckBlobHeader(h); !st.ok()) return st;
  std::string b(kBlobHeaderBytes, '\0');
  EncodeBlobHeaderInto(h, b.data());
  return b;
}

void EncodeBlobHeaderInto(const BlobHeader& h, char* b) {
  std::memset(b, 0, kBlobHeaderBytes);
  Put<uint32_t>(b, 0, kBlobMagic);
  Put<uint16_t>(b, 4, kBlobVersion);
  Put<uint16_t>(b, 6, 0);  // flags
  Put<uint64_t>(b, 16, h.generation);
  Put<uint64_t>(b, 24, h.size);
  Put<uint64_t>(b, 32, h.value_checksum);
  Put<uint16_t>(b, 40, static_cast<uint16_t>(h.tenant.size()));
  Put<uint16_t>(b, 42, static_cast<uint16_t>(h.key.size()));
  Put<uint16_t>(b, 44, static_cast<uint16_t>(h.group_id.size()));
  size_t at = kBlobFixedBytes;
  for (const std::string* s : {&h.tenant, &h.key, &h.group_id}) {
    std::memcpy(b + at, s->data(), s->size());
    at += s->size();
  }
  Put<uint64_t>(b, 8, HeaderChecksum(std::string_view(b, kBlobHeaderBytes)));
}

Result<BlobHeader> DecodeBlobHeader(std::string_view block) {
  if (block.size() < kBlobHeaderBytes) {
    return Status(Code::kProtocolError, "blob header shorter than 4 KiB");
  }
  // Without the magic this block starts no blob (free space, a freed blob, or
  // the inside of a value); with it, anything wrong means damage.
  if (Get<uint32_t>(block, 0) != kBlobMagic) return NotFound("no blob here");
  if (Get<uint16_t>(block, 4) != kBlobVersion) {
    return Status(Code::kProtocolError,
                  "unsupported blob version " + std::to_string(Get<uint16_t>(block, 4)));
  }
  // The flags sit outside the checksummed range; version 1 defines none.
  if (Get<uint16_t>(block, 6) != 0) {
    return Status(Code::kProtocolError,
                  "blob header flags " + std::to_string(Get<uint16_t>(block, 6)) + " (must be 0)");
  }
  if (Get<uint64_t>(block, 8) != HeaderChecksum(block)) {
    return Status(Code::kProtocolError, "blob header checksum mismatch (torn or corrupt)");
  }
  BlobHeader h;
  h.generation = Get<uint64_t>(block, 16);
  h.size = Get<uint64_t>(block, 24);
  h.value_checksum = Get<uint64_t>(block, 32);
  const size_t tl = Get<uint16_t>(block, 40), kl = Get<uint16_t>(block, 42),
               gl = Get<uint16_t>(block, 44);
  if (h.size == 0 || h.size > kMaxBlobValueBytes) {
    return Status(Code::kProtocolError,
                  "blob value size " + std::to_string(h.size) + " out of range");
  }
  if (tl == 0 || kl == 0 || kBlobFixedBytes + tl + kl + gl > kBlobHeaderBytes) {
    return Status(Code::kProtocolError, "blob header name lengths out of range");
  }
  h.tenant.assign(block.substr(kBlobFixedBytes, tl));
  h.key.assign(block.substr(kBlobFixedBytes + tl, kl));
  h.group_id.assign(block.substr(kBlobFixedBytes + tl + kl, gl));
  return h;
}

}  // namespace tierkv
