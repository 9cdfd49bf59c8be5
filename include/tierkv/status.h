// Status and Result: how every tierkv call reports success or failure.
//
// Errors are values. A Status carries one code from the table below and a
// human-readable message naming the real cause. The numeric values are part of
// the wire protocol and never change; new codes are only appended.
//
//   code  name              kind          meaning
//   0     OK                -             success
//   1     NOT_FOUND         miss          the key (or grant id) does not exist
//   2     DUPLICATED        fault         put on a key that is already stored
//   3     NO_SPACE          backpressure  no room can be made (all leased, too big)
//   4     RETRY             backpressure  transient conflict; the same call may succeed later
//   5     LEASE_EXPIRED     fault         a read lease or write grant ran out before release
//   6     INVALID_ARGUMENT  fault         malformed input (empty key, bad tenant, ...)
//   7     TOO_LARGE         fault         a key or value exceeds a configured limit
//   8     PROTOCOL_ERROR    fault         a frame that cannot be decoded
//   9     IO_ERROR          fault         a socket or device error
//   10    UNAVAILABLE       fault         not connected, or the manager is shutting down
//   11    NOT_SUPPORTED     fault         unknown operation, or not possible on this transport
//   12    INTERNAL          fault         a bug; please report it
//
// Thread-safety: Status and Result are values; distinct objects may be used from
// distinct threads freely.
#ifndef TIERKV_STATUS_H_
#define TIERKV_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tierkv {

enum class Code : uint16_t {
  kOk = 0,
  kNotFound = 1,
  kDuplicated = 2,
  kNoSpace = 3,
  kRetry = 4,
  kLeaseExpired = 5,
  kInvalidArgument = 6,
  kTooLarge = 7,
  kProtocolError = 8,
  kIoError = 9,
  kUnavailable = 10,
  kNotSupported = 11,
  kInternal = 12,
};

// Highest code value defined; wire decoders reject anything above it.
inline constexpr uint16_t kMaxCode = 12;

// The upper-case name of `code` ("NOT_FOUND"), or "UNKNOWN".
std::string_view CodeName(Code code);

// True for codes that signal backpressure rather than a fault (NO_SPACE, RETRY).
bool IsBackpressure(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NOT_FOUND: key 'abc' not found" (or "OK").
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
inline Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }

// Either a value of type T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  // The status: OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }
  Code code() const { return ok() ? Code::kOk : std::get<1>(v_).code(); }

  // Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tierkv

#endif  // TIERKV_STATUS_H_
