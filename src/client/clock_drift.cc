// parse_clock_drift: the clock-rate allowance of ClientOptions, DLOCK_CLOCK_DRIFT and
// `dlock --clock-drift` (docs/adr/0012-client-deadline-allowance.md).

#include <charconv>
#include <string>
#include <string_view>

#include "dlock/client.h"

namespace dlock::client {

double parse_clock_drift(std::string_view text, std::string_view field) {
  std::string_view number = text;
  const bool percent = !number.empty() && number.back() == '%';
  if (percent) number.remove_suffix(1);
  double value = -1;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (error != std::errc() || end != number.data() + number.size()) value = -1;
  if (percent) value /= 100;
  // Not NaN, and short of a half: beyond that the "allowance" would be the lease itself.
  if (!(value >= 0 && value < 0.5)) {
    throw InvalidArgumentError(std::string(field),
                               std::string(field) + ": '" + std::string(text) +
                                   "' is not a clock-rate allowance in [0, 0.5), e.g. 0.01 or 1%");
  }
  return value;
}

}  // namespace dlock::client
