// The core's time seam (core/time_source.h, ADR-0034): the simulated time the core's unit tests
// run on (support/simulated_time.h) — callbacks in due order, each at its own instant, cancel
// and re-arm — and the real one dlockd uses, timers on an io_context.

#include "core/time_source.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <string>
#include <vector>

#include "support/simulated_time.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

TEST(SimulatedTime, AdvanceRunsDueCallbacksInOrderEachAtItsInstant) {
  SimulatedTime time;
  const auto start = time.steady_now();
  const auto wall_start = time.wall_now();
  std::vector<std::pair<std::string, milliseconds>> fired;
  const auto at = [&](const std::string& name) {
    return [&, name] {
      fired.emplace_back(name, std::chrono::duration_cast<milliseconds>(time.steady_now() - start));
    };
  };
  auto late = time.make_timer();
  auto early = time.make_timer();
  auto tie = time.make_timer();
  late->arm(30ms, at("late"));
  early->arm(10ms, at("early"));
  tie->arm(30ms, at("tie"));  // due with `late`, armed after it
  auto chained = time.make_timer();
  auto chain = time.make_timer();
  chain->arm(15ms, [&] { chained->arm(5ms, at("chained")); });  // armed within the window
  EXPECT_EQ(time.armed(), 4u);
  EXPECT_EQ(time.next_due_in(), 10ms);
  time.advance(9ms);
  EXPECT_TRUE(fired.empty()) << "ran before it was due";
  time.advance(21ms);
  const std::vector<std::pair<std::string, milliseconds>> expected{
      {"early", 10ms}, {"chained", 20ms}, {"late", 30ms}, {"tie", 30ms}};
  EXPECT_EQ(fired, expected);
  EXPECT_EQ(time.steady_now() - start, 30ms);
  EXPECT_EQ(time.wall_now() - wall_start, 30ms) << "the wall clock moves with the steady one";
  EXPECT_EQ(time.armed(), 0u);
  EXPECT_FALSE(time.next_due_in());
}

TEST(SimulatedTime, CancelledReArmedAndDestroyedTimersDoNotRunWhatTheyHeld) {
  SimulatedTime time;
  int cancelled = 0, replaced = 0, rearmed = 0, destroyed = 0;
  auto a = time.make_timer();
  a->arm(10ms, [&] { ++cancelled; });
  a->cancel();
  auto b = time.make_timer();
  b->arm(10ms, [&] { ++replaced; });
  b->arm(20ms, [&] { ++rearmed; });  // replaces the first callback
  auto c = time.make_timer();
  c->arm(10ms, [&] { ++destroyed; });
  c.reset();
  EXPECT_EQ(time.armed(), 1u);
  time.advance(1s);
  EXPECT_EQ(cancelled, 0);
  EXPECT_EQ(replaced, 0);
  EXPECT_EQ(rearmed, 1);
  EXPECT_EQ(destroyed, 0);
}

TEST(AsioTimeSource, TimersRunOnTheIoContextAndACancelledOneNever) {
  boost::asio::io_context io;
  core::AsioTimeSource time(io);
  int fired = 0, cancelled = 0;
  auto timer = time.make_timer();
  auto other = time.make_timer();
  timer->arm(1ms, [&] { ++fired; });
  other->arm(1ms, [&] { ++cancelled; });
  other->cancel();
  EXPECT_EQ(fired, 0) << "ran inside arm()";
  io.run();  // returns once no timer is left
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(cancelled, 0);
}

}  // namespace
}  // namespace dlock::testing
