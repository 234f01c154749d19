// LogLimiter (src/server/log_limiter.h): the per-client bound on log lines of contract C4.

#include "server/log_limiter.h"

#include <gtest/gtest.h>

namespace dlock::server {
namespace {

using namespace std::chrono_literals;
using Clock = LogLimiter::Clock;

LogLimiter::Options small() {
  LogLimiter::Options options;
  options.lines_per_second = 10;
  options.burst = 5;
  options.quiet = 1s;
  return options;
}

TEST(LogLimiter, AdmitsABurstThenDropsAndAnnouncesTheEpisodeOnce) {
  LogLimiter limiter(small());
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 5; ++i) {
    const auto verdict = limiter.admit("10.0.0.1", "audit:grant", t0);
    EXPECT_TRUE(verdict.admit) << i;
    EXPECT_FALSE(verdict.notice) << i;
  }
  const auto first_drop = limiter.admit("10.0.0.1", "audit:grant", t0);
  EXPECT_FALSE(first_drop.admit);
  ASSERT_TRUE(first_drop.notice);
  EXPECT_TRUE(first_drop.notice->started);
  EXPECT_EQ(first_drop.notice->client, "10.0.0.1");
  const auto second_drop = limiter.admit("10.0.0.1", "grant", t0);
  EXPECT_FALSE(second_drop.admit);
  EXPECT_FALSE(second_drop.notice);  // one notice per episode
  EXPECT_EQ(limiter.dropped_total(), 2u);
}

TEST(LogLimiter, RefillsAtItsRate) {
  LogLimiter limiter(small());
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(limiter.admit("a", "k", t0).admit);
  EXPECT_FALSE(limiter.admit("a", "k", t0).admit);
  EXPECT_TRUE(limiter.admit("a", "k", t0 + 100ms).admit);  // 10 a second: one token
  EXPECT_FALSE(limiter.admit("a", "k", t0 + 100ms).admit);
  // Never more than the burst, however long the client was quiet.
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += limiter.admit("a", "k", t0 + 1h).admit ? 1 : 0;
  EXPECT_EQ(admitted, 5);
}

TEST(LogLimiter, OneClientOverItsRateDoesNotTakeAnotherClientsLines) {
  LogLimiter limiter(small());
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 100; ++i) limiter.admit("flooder", "audit:grant", t0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.admit("quiet", "audit:grant", t0).admit) << i;
}

TEST(LogLimiter, TheEndNoticeCountsEveryDroppedLineByKindOnceTheClientIsQuiet) {
  LogLimiter limiter(small());
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 5; ++i) limiter.admit("a", "audit:grant", t0);
  limiter.admit("a", "audit:grant", t0);
  limiter.admit("a", "audit:grant", t0);
  limiter.admit("a", "audit:release", t0 + 10ms);
  EXPECT_TRUE(limiter.sweep(t0 + 500ms).empty());  // not quiet long enough
  const auto ended = limiter.sweep(t0 + 10ms + 1s);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].started);
  EXPECT_EQ(ended[0].client, "a");
  EXPECT_EQ(ended[0].dropped, 3u);
  EXPECT_EQ(ended[0].dropped_by_kind.at("audit:grant"), 2u);
  EXPECT_EQ(ended[0].dropped_by_kind.at("audit:release"), 1u);
  EXPECT_TRUE(limiter.sweep(t0 + 1h).empty());  // told once
  EXPECT_EQ(limiter.dropped_total(), 3u);
}

TEST(LogLimiter, TheClientsNextLineAfterAQuietSpellCarriesTheEndNotice) {
  LogLimiter limiter(small());
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 6; ++i) limiter.admit("a", "k", t0);
  const auto verdict = limiter.admit("a", "k", t0 + 2s);
  EXPECT_TRUE(verdict.admit);
  ASSERT_TRUE(verdict.notice);
  EXPECT_FALSE(verdict.notice->started);
  EXPECT_EQ(verdict.notice->dropped, 1u);
  EXPECT_TRUE(limiter.sweep(t0 + 1h).empty());
}

TEST(LogLimiter, ForgetsIdleClientsBeyondItsCapacityButNotThoseInAnEpisode) {
  auto options = small();
  options.max_clients = 2;
  LogLimiter limiter(options);
  const auto t0 = Clock::time_point{} + 1h;
  for (int i = 0; i < 6; ++i) limiter.admit("dropping", "k", t0);
  limiter.admit("idle", "k", t0);
  limiter.admit("new", "k", t0 + 1s);  // forgets "idle" (full again), keeps "dropping"
  const auto ended = limiter.sweep(t0 + 2s);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].client, "dropping");
}

}  // namespace
}  // namespace dlock::server
