// WatchLog (core/watch_log.h, C3 "Watch"): positions, filters, pages, the bounded ring (a
// watcher that fell out of it is answered with a reset), positions of another process, long
// polls woken by a matching event only, cancelled, and ended by shutdown.

#include "core/watch_log.h"

#include <gtest/gtest.h>

#include <optional>

#include "support/simulated_time.h"

namespace dlock::core {
namespace {

using std::chrono::milliseconds;

class WatchLogTest : public ::testing::Test {
 protected:
  WatchEvent event(const std::string& key, WatchKind kind = WatchKind::kGrant) {
    WatchEvent result;
    result.kind = kind;
    result.key = key;
    result.token = ++tokens_;
    return result;
  }

  // A poll that must answer at once.
  WatchLog::Page poll_now(WatchLog& log, const WatchFilter& filter, const std::string& after,
                          std::size_t limit = 100) {
    std::optional<WatchLog::Page> page;
    log.poll(
        filter, after, limit, milliseconds(0), [&](WatchLog::Page got) { page = got; }, nullptr);
    EXPECT_TRUE(page.has_value());
    return page.value_or(WatchLog::Page{});
  }

  testing::SimulatedTime time_;
  std::uint64_t tokens_ = 0;
};

TEST_F(WatchLogTest, PagesResumeFromTheirNextWithoutLossOrRepetition) {
  WatchLog log(time_, 100, "e1");
  const WatchFilter prefix{"ns/a", true};
  const auto start = poll_now(log, prefix, "").next;
  EXPECT_EQ(start, "e1.0");
  for (const auto* key : {"ns/a1", "ns/b", "ns/a2", "ns/a3", "other/a4"}) log.record(event(key));
  std::vector<std::uint64_t> seen;
  std::string after = start;
  for (int i = 0; i < 10; ++i) {
    const auto page = poll_now(log, prefix, after, 1);
    EXPECT_FALSE(page.reset);
    for (const auto& got : page.events) seen.push_back(got.token);
    after = page.next;
    if (page.events.empty()) break;
  }
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1, 3, 4}));
  EXPECT_EQ(after, "e1.5");  // the non-matching event after the last one is behind it too
  EXPECT_EQ(poll_now(log, WatchFilter{"ns/a", false}, start).events.size(), 0u);  // exact key
}

TEST_F(WatchLogTest, AWatcherThatFellOutOfTheRingIsReset) {
  WatchLog log(time_, 3, "e1");
  const WatchFilter all{"", true};
  const auto start = poll_now(log, all, "").next;
  for (int i = 0; i < 3; ++i) log.record(event("k"));
  EXPECT_FALSE(poll_now(log, all, start).reset);  // three kept: nothing dropped yet
  log.record(event("k"));
  const auto page = poll_now(log, all, start);
  ASSERT_TRUE(page.reset.has_value());
  EXPECT_NE(page.reset->find("fell out"), std::string::npos);
  EXPECT_TRUE(page.events.empty());
  EXPECT_EQ(page.next, "e1.4");
  EXPECT_EQ(poll_now(log, all, "e1.1").events.size(), 3u);  // the oldest kept follow seq 1
}

TEST_F(WatchLogTest, PositionsOfAnotherProcessOrTheFutureAreReset) {
  WatchLog log(time_, 10, "e2");
  log.record(event("k"));
  for (const auto* position : {"e1.1", "e2.7", "e2.", "e2", ".1", "e2.1.1"}) {
    const auto page = poll_now(log, WatchFilter{"k", false}, position);
    EXPECT_TRUE(page.reset.has_value()) << position;
    EXPECT_EQ(page.next, "e2.1") << position;
  }
}

TEST_F(WatchLogTest, ALongPollWakesOnAMatchingEventOnly) {
  WatchLog log(time_, 10, "e1");
  std::optional<WatchLog::Page> page;
  log.poll(
      WatchFilter{"k", false}, "e1.0", 10, milliseconds(60'000),
      [&](WatchLog::Page got) { page = got; }, nullptr);
  EXPECT_EQ(log.pending(), 1u);
  log.record(event("other"));
  EXPECT_FALSE(page.has_value());
  log.record(event("k", WatchKind::kRelease));
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->events.size(), 1u);
  EXPECT_EQ(page->events[0].kind, WatchKind::kRelease);
  EXPECT_EQ(page->next, "e1.2");
  EXPECT_EQ(log.pending(), 0u);
}

TEST_F(WatchLogTest, ADeadlineAnswersEmptyACancelLeavesAndShutdownEnds) {
  WatchLog log(time_, 10, "e1");
  std::optional<WatchLog::Page> timed;
  log.poll(
      WatchFilter{"k", false}, "", 10, milliseconds(20), [&](WatchLog::Page got) { timed = got; },
      nullptr);
  time_.advance(milliseconds(19));
  EXPECT_FALSE(timed.has_value()) << "answered before its wait";
  time_.advance(milliseconds(1));
  ASSERT_TRUE(timed.has_value());
  EXPECT_TRUE(timed->events.empty());
  EXPECT_EQ(timed->next, "e1.0");

  // A cancelled poll (its client went away) leaves at once and is answered then, so that what
  // its answer releases (the API's count of waiting requests) is not held until an event.
  auto cancellation = std::make_shared<Cancellation>();
  int cancelled_answers = 0;
  log.poll(
      WatchFilter{"k", false}, "", 10, milliseconds(60'000),
      [&](WatchLog::Page) { ++cancelled_answers; }, cancellation);
  EXPECT_EQ(cancelled_answers, 0);
  cancellation->cancel();
  EXPECT_EQ(log.pending(), 0u);
  EXPECT_EQ(cancelled_answers, 1);
  log.record(event("k"));
  EXPECT_EQ(cancelled_answers, 1);

  std::optional<WatchLog::Page> ended;
  log.poll(
      WatchFilter{"x", false}, "", 10, milliseconds(60'000),
      [&](WatchLog::Page got) { ended = got; }, nullptr);
  log.shutdown();
  EXPECT_TRUE(ended.has_value());
  EXPECT_EQ(log.pending(), 0u);
}

}  // namespace
}  // namespace dlock::core
