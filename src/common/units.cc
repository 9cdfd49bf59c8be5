#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace tierkv {
namespace {

std::string Lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  const std::string original(text);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  size_t i = 0;
  bool seen_digit = false;
  bool seen_dot = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    if (text[i] == '.') {
      if (seen_dot) return InvalidArgument("invalid size '" + original + "': two decimal points");
      seen_dot = true;
    } else {
      seen_digit = true;
    }
    ++i;
  }
  if (!seen_digit) return InvalidArgument("invalid size '" + original + "': expected a number");
  const std::string number(text.substr(0, i));
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  const std::string u = Lower(unit);
  long double mult = 1;
  if (u.empty() || u == "b") {
    mult = 1;
  } else if (u == "k" || u == "kb" || u == "kib") {
    mult = 1024.0L;
  } else if (u == "m" || u == "mb" || u == "mib") {
    mult = 1024.0L * 1024;
  } else if (u == "g" || u == "gb" || u == "gib") {
    mult = 1024.0L * 1024 * 1024;
  } else if (u == "t" || u == "tb" || u == "tib") {
    mult = 1024.0L * 1024 * 1024 * 1024;
  } else {
    return InvalidArgument("invalid size '" + original + "': unknown unit '" + std::string(unit) +
                           "' (use b, kb, mb, gb, tb or KiB, MiB, GiB, TiB)");
  }
  const long double value = std::strtold(number.c_str(), nullptr) * mult;
  if (!std::isfinite(value) || value >= 18446744073709551615.0L) {
    return InvalidArgument("invalid size '" + original + "': too large");
  }
  if (seen_dot && std::floor(value) != value && mult == 1) {
    return InvalidArgument("invalid size '" + original + "': fractional bytes");
  }
  return static_cast<uint64_t>(value);
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

}  // namespace tierkv
