// How dlock reports a server it cannot reach (cli/server_retry.h): the library's messages
// shortened to server and reason, one line per failure off a terminal, a countdown line on one,
// the streak bounded by --timeout, and a call that may have been served not repeated unless
// it is safe. The waits are recorded, not slept.

#include "cli/server_retry.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

TEST(DescribeFailure, ShortensTheLibrarysMessages) {
  const auto refused = describe_failure(
      "get k: cannot connect to 127.0.0.1:7070: Connection refused (gave up after 1 attempt in "
      "0ms)");
  EXPECT_EQ(refused.server, "127.0.0.1:7070");
  EXPECT_EQ(refused.reason, "connection refused");
  EXPECT_TRUE(refused.unreachable);
  const auto hung_up = describe_failure("get k: reading from [::1]:7443 failed: end of stream");
  EXPECT_EQ(hung_up.server, "[::1]:7443");
  EXPECT_EQ(hung_up.reason, "end of stream");
  const auto busy = describe_failure("acquire k: backend down (gave up after 1 attempt in 3ms)");
  EXPECT_FALSE(busy.unreachable);
  EXPECT_EQ(busy.reason, "backend down");
}

struct Recorded {
  std::ostringstream err;
  std::vector<milliseconds> sleeps;
};

void record_sleeps(ServerRetry& retry, Recorded& recorded) {
  retry.set_sleep_for_test([&recorded](milliseconds delay) { recorded.sleeps.push_back(delay); });
}

TEST(ServerRetry, OffATerminalEachFailureIsOneLineAndTheCallIsRetried) {
  Recorded recorded;
  ServerRetry retry(recorded.err, /*terminal=*/false, milliseconds(60'000));
  record_sleeps(retry, recorded);
  int attempts = 0;
  retry.run([&](SteadyClock::time_point) {
    if (++attempts < 3) {
      throw UnavailableError("get k: cannot connect to h:1: Connection refused");
    }
  });
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(recorded.err.str(),
            "dlock: cannot reach h:1 (connection refused); retrying in 1s\n"
            "dlock: cannot reach h:1 (connection refused); retrying in 2s\n");
  EXPECT_EQ(recorded.sleeps, (std::vector<milliseconds>{milliseconds(1000), milliseconds(2000)}));
}

TEST(ServerRetry, OnATerminalOneLineCountsDownAndIsClearedAfterwards) {
  Recorded recorded;
  ServerRetry retry(recorded.err, /*terminal=*/true, milliseconds(60'000));
  record_sleeps(retry, recorded);
  int attempts = 0;
  retry.run([&](SteadyClock::time_point) {
    if (++attempts < 3) throw UnavailableError("x: cannot connect to h:1: Connection refused");
  });
  const std::string line = "\r\x1b[Kdlock: cannot reach h:1 (connection refused); retrying in ";
  EXPECT_EQ(recorded.err.str(),
            line + "1s\u2026" + line + "2s\u2026" + line + "1s\u2026" + "\r\x1b[K");
  // The 2 s wait is drawn as 2s, then 1s: one redraw a second.
  EXPECT_EQ(recorded.sleeps, (std::vector<milliseconds>{milliseconds(1000), milliseconds(1000),
                                                        milliseconds(1000)}));
}

TEST(ServerRetry, GivesUpWhenTheStreakHasLastedTheTimeout) {
  Recorded recorded;
  ServerRetry retry(recorded.err, /*terminal=*/false, milliseconds(0));
  record_sleeps(retry, recorded);
  int attempts = 0;
  EXPECT_THROW(retry.run([&](SteadyClock::time_point) {
    ++attempts;
    throw UnavailableError("x: cannot connect to h:1: Connection refused");
  }),
               UnavailableError);
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(recorded.sleeps.empty());
}

TEST(ServerRetry, ACallThatMayHaveBeenServedIsRepeatedOnlyWhenSafe) {
  Recorded recorded;
  ServerRetry retry(recorded.err, /*terminal=*/false, milliseconds(60'000));
  record_sleeps(retry, recorded);
  int attempts = 0;
  EXPECT_THROW(retry.run(
                   [&](SteadyClock::time_point) {
                     ++attempts;
                     throw UnknownOutcomeError("revoke k: reading from h:1 failed: reset");
                   },
                   /*repeat_safe=*/false),
               UnknownOutcomeError);
  EXPECT_EQ(attempts, 1);
  // Other errors are not retried at all.
  EXPECT_THROW(retry.run([&](SteadyClock::time_point) { throw LockLostError("gone"); }),
               LockLostError);
  EXPECT_TRUE(recorded.err.str().empty());
}

}  // namespace
}  // namespace dlock::cli
