#pragma once

// Simulated time for unit tests of the core (ADR-0034; Envoy's SimulatedTimeSystem is the
// model): both clocks stand still until the test moves them with advance(), which runs every
// timer callback due by then, in due order, on the test's thread. A callback that posts work to
// another thread (the service's workers) does not delay advance(): wait for that work's effect
// (wait_until) before the next advance when a timer it arms matters.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/time_source.h"

namespace dlock::testing {

class SimulatedTime final : public core::TimeSource {
 public:
  // The wall clock starts at `wall_start`; the steady clock at an arbitrary point.
  explicit SimulatedTime(
      WallClock::time_point wall_start = WallClock::time_point(std::chrono::hours(24 * 365 * 56)));
  ~SimulatedTime() override;
  SimulatedTime(const SimulatedTime&) = delete;
  SimulatedTime& operator=(const SimulatedTime&) = delete;

  SteadyClock::time_point steady_now() const override;
  WallClock::time_point wall_now() const override;
  core::TimerPtr make_timer() override;

  // Moves both clocks `by` forward; each due callback runs with the clocks at its own instant.
  void advance(std::chrono::milliseconds by);
  // Callbacks armed and not yet run or cancelled, and how far ahead the earliest is due.
  std::size_t armed() const;
  std::optional<std::chrono::milliseconds> next_due_in() const;

  struct State;  // shared with the timers, which may outlive the source

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dlock::testing
