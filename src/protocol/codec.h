// Little-endian binary writer and bounds-checked reader for frame bodies.
//
// Strings and byte blobs are a u32 length followed by the bytes. The reader never
// reads past its buffer: a short or lying body makes it fail (ok() == false) and
// every later read returns zero values. Decoders check ok() once at the end.
//
// Thread-safety: none; one writer or reader per thread.
#ifndef TIERKV_PROTOCOL_CODEC_H_
#define TIERKV_PROTOCOL_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv::proto {

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_->append(s);
  }
  // Reserves a u32 length and `n` bytes for a blob, returning where they start;
  // lets callers copy a value straight into the frame.
  char* BlobSpace(size_t n) {
    U32(static_cast<uint32_t>(n));
    const size_t at = out_->size();
    out_->resize(at + n);
    return out_->data() + at;
  }
  // A per-item status: u16 code, then the message when the code is not OK.
  void ItemStatus(const Status& st) {
    U16(static_cast<uint16_t>(st.code()));
    if (!st.ok()) Str(st.message());
  }

 private:
  void Raw(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint8_t U8() { return Fixed<uint8_t>(); }
  uint16_t U16() { return Fixed<uint16_t>(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  uint64_t U64() { return Fixed<uint64_t>(); }
  int64_t I64() { return Fixed<int64_t>(); }
  // A view into the input buffer; empty on failure.
  std::string_view Str() {
    const uint32_t n = U32();
    if (!ok_ || in_.size() - pos_ < n) return Fail();
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A u32 element count, refused when the remaining bytes cannot hold `count`
  // elements of at least `min_element_bytes` each (so no allocation trusts a lie).
  uint32_t Count(size_t min_element_bytes) {
    const uint32_t n = U32();
    if (ok_ && static_cast<uint64_t>(n) * min_element_bytes > in_.size() - pos_) Fail();
    return ok_ ? n : 0;
  }
  Status ItemStatus() {
    const uint16_t code = U16();
    if (!ok_) return Status(Code::kProtocolError, "truncated item status");
    if (code > kMaxCode) {
      Fail();
      return Status(Code::kProtocolError, "unknown status code " + std::to_string(code));
    }
    if (code == 0) return Status::Ok();
    std::string_view msg = Str();
    return Status(static_cast<Code>(code), std::string(msg));
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == in_.size(); }
  // OK when everything decoded and nothing is left over; PROTOCOL_ERROR otherwise.
  Status Finish(std::string_view what) const {
    if (!ok_)
      return Status(Code::kProtocolError, std::string(what) + ": truncated or malformed body");
    if (pos_ != in_.size()) {
      return Status(Code::kProtocolError, std::string(what) + ": " +
                                              std::to_string(in_.size() - pos_) +
                                              " unexpected trailing bytes");
    }
    return Status::Ok();
  }

 private:
  std::string_view Fail() {
    ok_ = false;
    pos_ = in_.size();
    return {};
  }
  template <typename T>
  T Fixed() {
    T v{};
    if (!ok_ || in_.size() - pos_ < sizeof(T)) {
      Fail();
      return v;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace tierkv::proto

#endif  // TIERKV_PROTOCOL_CODEC_H_
