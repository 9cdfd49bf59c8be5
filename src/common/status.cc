#include "tierkv/status.h"

namespace tierkv {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kDuplicated:
      return "DUPLICATED";
    case Code::kNoSpace:
      return "NO_SPACE";
    case Code::kRetry:
      return "RETRY";
    case Code::kLeaseExpired:
      return "LEASE_EXPIRED";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kTooLarge:
      return "TOO_LARGE";
    case Code::kProtocolError:
      return "PROTOCOL_ERROR";
    case Code::kIoError:
      return "IO_ERROR";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kNotSupported:
      return "NOT_SUPPORTED";
    case Code::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

bool IsBackpressure(Code code) { return code == Code::kNoSpace || code == Code::kRetry; }

std::string Status::ToString() const {
  std::string out(CodeName(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

}  // namespace tierkv
