#pragma once

// The SQLite store's clock (docs/adr/0013-sqlite-store-clock.md): the wall clock read once at
// open, advanced by the steady clock, so a step of the host's wall clock while the store runs
// moves no lease. ClockVfs makes it 'now' in SQL. After a restart with live leases it lags the
// host's wall clock by the downtime (ADR-0013), so the times the store reports are converted with
// wall_time(): now by the wall clock plus how far the time is from the store's now.

#include <atomic>
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
  // How far the host's wall clock is ahead of this clock, in ms (0 unless a restart found live
  // leases or the wall clock stepped since open). Kept while a new measure stays within
  // kOffsetSlackMs of it, so that two reads of one time answer the same instant.
  std::int64_t wall_offset_ms() const {
    using std::chrono::microseconds;
    const auto wall_us =
        std::chrono::duration_cast<microseconds>(WallClock::now().time_since_epoch()).count();
    const auto store_us =
        wall_at_open_ms_ * 1000 +
        std::chrono::duration_cast<microseconds>(SteadyClock::now() - steady_at_open_).count();
    const auto measured = (wall_us - store_us + (wall_us >= store_us ? 500 : -500)) / 1000;
    const auto kept = offset_ms_.load(std::memory_order_relaxed);
    if (measured - kept <= kOffsetSlackMs && kept - measured <= kOffsetSlackMs) return kept;
    offset_ms_.store(measured, std::memory_order_relaxed);
    return measured;
  }
  // A time of this clock (unix ms) as the wall clock reads it, given wall_offset_ms(): one offset
  // for every time of one answer keeps their differences exact.
  static WallClock::time_point wall_time(std::int64_t store_ms, std::int64_t offset_ms) {
    return WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(
        std::chrono::milliseconds(store_ms + offset_ms)));
  }

 private:
  static constexpr std::int64_t kOffsetSlackMs = 2;
  std::int64_t wall_at_open_ms_;
  SteadyClock::time_point steady_at_open_;
  mutable std::atomic<std::int64_t> offset_ms_{0};
};

}  // namespace dlock::store::sqlite
