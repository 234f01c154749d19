#pragma once

#include <chrono>
#include <cstdint>

#include "dlock/types.h"

namespace dlock::util {

// Backends exchange timestamps as integer microseconds since the Unix epoch, computed by the
// backend's own clock; these convert them without consulting any local clock.
inline WallClock::time_point from_unix_micros(std::int64_t micros) {
  return WallClock::time_point(
      std::chrono::duration_cast<WallClock::duration>(std::chrono::microseconds(micros)));
}

inline std::int64_t to_unix_micros(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace dlock::util
