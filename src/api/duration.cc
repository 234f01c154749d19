// parse_duration / format_duration: the one spelling of durations shared by the CLI flags, the
// client options and the server configuration ("500ms", "30s", "5m", "1h").

#include <charconv>
#include <chrono>
#include <limits>
#include <string>
#include <string_view>

#include "dlock/duration.h"
#include "dlock/errors.h"

namespace dlock {
namespace {

struct Unit {
  std::string_view suffix;
  std::int64_t millis;
};

// Longest suffix first so "ms" is not read as "m" followed by garbage.
constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}};

[[noreturn]] void bad(std::string_view text, std::string_view field, const std::string& why) {
  throw InvalidArgumentError(std::string(field), std::string(field) + ": '" + std::string(text) +
                                                     "' is not a duration (" + why +
                                                     "; use e.g. 500ms, 30s, 5m, 1h)");
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view field) {
  if (text.empty()) bad(text, field, "empty");
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) bad(text, field, "it must start with a non-negative integer");
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + digits, value);
  if (error != std::errc() || end != text.data() + digits) bad(text, field, "number too large");
  const std::string_view suffix = text.substr(digits);
  if (suffix.empty()) {
    // A bare number is ambiguous (seconds? milliseconds?) except for zero.
    if (value == 0) return std::chrono::milliseconds(0);
    bad(text, field, "a unit is required");
  }
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    if (value > std::numeric_limits<std::int64_t>::max() / unit.millis) {
      bad(text, field, "too large");
    }
    return std::chrono::milliseconds(value * unit.millis);
  }
  bad(text, field, "unknown unit '" + std::string(suffix) + "'");
}

std::string format_duration(std::chrono::milliseconds duration) {
  const std::int64_t ms = duration.count();
  if (ms != 0) {
    for (auto it = std::rbegin(kUnits); it != std::rend(kUnits); ++it) {
      if (ms % it->millis == 0) return std::to_string(ms / it->millis) + std::string(it->suffix);
    }
  }
  return std::to_string(ms) + "ms";
}

}  // namespace dlock
