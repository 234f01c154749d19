#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "dlock/types.h"

namespace dlock::util {

// Backends exchange timestamps as integer microseconds since the Unix epoch, computed by the
// backend's own clock; these convert them without consulting any local clock.
// A value beyond what WallClock holds (nanoseconds: about years 1678..2261) saturates at its
// bound instead of overflowing: it comes from a stored record, which is data.
inline WallClock::time_point from_unix_micros(std::int64_t micros) {
  constexpr auto kLimit =
      std::chrono::duration_cast<std::chrono::microseconds>(WallClock::duration::max()).count();
  micros = std::clamp<std::int64_t>(micros, -kLimit, kLimit);
  return WallClock::time_point(
      std::chrono::duration_cast<WallClock::duration>(std::chrono::microseconds(micros)));
}

inline std::int64_t to_unix_micros(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace dlock::util
