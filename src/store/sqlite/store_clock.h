#pragma once

// The SQLite store's clock (docs/adr/0013-sqlite-store-clock.md): the wall clock read once at
// open, advanced by the steady clock, so a step of the host's wall clock while the store runs
// moves no lease. ClockVfs makes it 'now' in SQL.

#include <chrono>
#include <cstdint>

#include "dlock/types.h"

namespace dlock::store::sqlite {

class StoreClock {
 public:
  StoreClock()
      : wall_at_open_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                             WallClock::now().time_since_epoch())
                             .count()),
        steady_at_open_(SteadyClock::now()) {}
  // Continues from `unix_ms` as of now (called once, before the store is shared).
  void resume_at(std::int64_t unix_ms) {
    wall_at_open_ms_ = unix_ms;
    steady_at_open_ = SteadyClock::now();
  }
  std::int64_t now_ms() const {
    return wall_at_open_ms_ + std::chrono::duration_cast<std::chrono::milliseconds>(
                                  SteadyClock::now() - steady_at_open_)
                                  .count();
  }

 private:
  std::int64_t wall_at_open_ms_;
  SteadyClock::time_point steady_at_open_;
};

}  // namespace dlock::store::sqlite
