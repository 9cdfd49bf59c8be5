// Parsing and printing of byte sizes with units ("4gb", "512MiB", "1.5G", "4096").
#ifndef TIERKV_COMMON_UNITS_H_
#define TIERKV_COMMON_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv {

// Parses a byte size. Accepted: a non-negative number (integer or decimal) followed
// by an optional unit, case-insensitive, optional space: b, k/kb/kib, m/mb/mib,
// g/gb/gib, t/tb/tib. All units are binary (1 kb = 1024 bytes), as memory sizes are.
// Errors: INVALID_ARGUMENT naming the offending text; overflow beyond 2^64-1.
Result<uint64_t> ParseByteSize(std::string_view text);

// "1.0 GiB", "512.0 MiB", "100 B".
std::string FormatByteSize(uint64_t bytes);

}  // namespace tierkv

#endif  // TIERKV_COMMON_UNITS_H_
