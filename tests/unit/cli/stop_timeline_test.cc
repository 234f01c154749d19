// The stop timeline of `dlock run` (ADR-0014): defaults derived from the TTL, the checks on
// the flags, and SIGKILL never later than half the margin before the deadline.

#include "cli/stop_timeline.h"

#include <gtest/gtest.h>

#include "dlock/errors.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

TEST(StopTimeline, DefaultMarginIsTheLargerOfOneSecondAndATenthOfTheTtl) {
  EXPECT_EQ(stop_times(milliseconds(30'000), {}, {}).margin, milliseconds(3'000));
  EXPECT_EQ(stop_times(milliseconds(5'000), {}, {}).margin, milliseconds(1'000));
  EXPECT_EQ(stop_times(milliseconds(120'000), {}, {}).margin, milliseconds(12'000));
}

TEST(StopTimeline, DefaultMarginLeavesRoomForTheExtends) {
  // A 1 s lock is extended with 667 ms left: a 1 s margin would stop every command.
  EXPECT_EQ(stop_times(milliseconds(1'000), {}, {}).margin, milliseconds(333));
  EXPECT_EQ(stop_times(milliseconds(2'400), {}, {}).margin, milliseconds(800));
}

TEST(StopTimeline, DefaultGraceIsHalfTheMargin) {
  EXPECT_EQ(stop_times(milliseconds(30'000), {}, {}).grace, milliseconds(1'500));
  EXPECT_EQ(stop_times(milliseconds(30'000), milliseconds(4'000), {}).grace, milliseconds(2'000));
  EXPECT_EQ(stop_times(milliseconds(30'000), {}, milliseconds(200)).grace, milliseconds(200));
}

TEST(StopTimeline, MarginOfHalfTheTtlOrMoreIsRefused) {
  EXPECT_THROW(stop_times(milliseconds(10'000), milliseconds(5'000), {}), InvalidArgumentError);
  EXPECT_NO_THROW(stop_times(milliseconds(10'000), milliseconds(4'999), {}));
  EXPECT_THROW(stop_times(milliseconds(10'000), milliseconds(0), {}), InvalidArgumentError);
  EXPECT_THROW(stop_times(milliseconds(10'000), {}, milliseconds(0)), InvalidArgumentError);
}

TEST(StopTimeline, SigtermAtDeadlineMinusMargin) {
  const SteadyClock::time_point deadline = SteadyClock::now() + milliseconds(30'000);
  const StopTimes times = stop_times(milliseconds(30'000), {}, {});
  EXPECT_EQ(term_time(deadline, times), deadline - milliseconds(3'000));
}

TEST(StopTimeline, SigkillAfterTheGraceButWithHalfTheMarginLeft) {
  const SteadyClock::time_point deadline = SteadyClock::now() + milliseconds(30'000);
  // Lost long before the deadline (revoked): the grace applies.
  const StopTimes times = stop_times(milliseconds(30'000), {}, milliseconds(10'000));
  const SteadyClock::time_point early = deadline - milliseconds(20'000);
  EXPECT_EQ(kill_time(early, deadline, times), early + milliseconds(10'000));
  // Stopping because the deadline is near: a long grace is cut.
  EXPECT_EQ(kill_time(term_time(deadline, times), deadline, times), deadline - milliseconds(1'500));
  // Defaults: SIGKILL exactly half the margin before the deadline.
  const StopTimes defaults = stop_times(milliseconds(30'000), {}, {});
  EXPECT_EQ(kill_time(term_time(deadline, defaults), deadline, defaults),
            deadline - milliseconds(1'500));
}

}  // namespace
}  // namespace dlock::cli
