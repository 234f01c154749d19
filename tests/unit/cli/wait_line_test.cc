// What dlock says about a held key (cli/wait_line.h): the holder named, escaped; several
// holders counted; the waiting line redrawn in place and cleared at the end.

#include "cli/wait_line.h"

#include <gtest/gtest.h>

#include <sstream>

#include "wait_until.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

LockInfo holder(const std::string& owner, FencingToken token, HoldMode mode) {
  LockInfo info;
  info.key = "k";
  info.owner_id = owner;
  info.fencing_token = token;
  info.mode = mode;
  return info;
}

TEST(HeldBy, NamesTheHolderOrTheNewestOfSeveral) {
  EXPECT_EQ(held_by({}), "held by another owner");
  EXPECT_EQ(held_by({holder("alice@node7", 41, HoldMode::kExclusive)}),
            "held by alice@node7 (token 41)");
  EXPECT_EQ(held_by({holder("a", 5, HoldMode::kShared), holder("b", 9, HoldMode::kShared),
                     holder("c", 7, HoldMode::kShared)}),
            "held by 3 readers, newest b (token 9)");
  // Server-supplied text is escaped (docs/cli.md, "Output").
  EXPECT_EQ(held_by({holder("x\x1b[2J", 1, HoldMode::kExclusive)}), "held by x\\x1b[2J (token 1)");
}

TEST(WaitingLine, SaysWhoAndHowLong) {
  const std::vector<LockInfo> one = {holder("alice", 41, HoldMode::kExclusive)};
  EXPECT_EQ(waiting_line("jobs/a", one, std::nullopt, milliseconds(12'400)),
            "dlock: waiting for jobs/a: held by alice (token 41); waited 12s");
  EXPECT_EQ(waiting_line("jobs/a", one, 2, milliseconds(0)),
            "dlock: waiting for jobs/a: held by alice (token 41); 2 ahead; waited 0s");
}

client::Waiter waiter(std::size_t position, const std::string& session_id) {
  client::Waiter one;
  one.position = position;
  one.owner_id = "w" + std::to_string(position);
  one.session_id = session_id;
  return one;
}

TEST(WaitersAhead, CountsThoseBeforeTheSessionsFirstAcquire) {
  // Session ids of other principals are not shown (C6): empty ones count as ahead.
  const std::vector<client::Waiter> queue = {waiter(1, ""), waiter(2, "s-other"), waiter(3, "s-me"),
                                             waiter(4, "s-me")};
  EXPECT_EQ(waiters_ahead(queue, "s-me"), 2U);
  EXPECT_EQ(waiters_ahead({waiter(1, "s-me")}, "s-me"), 0U);
  // Not listed (another dlockd answered, or not queued yet): no count rather than a wrong one.
  EXPECT_EQ(waiters_ahead(queue, "s-absent"), std::nullopt);
  EXPECT_EQ(waiters_ahead({waiter(1, "")}, ""), std::nullopt);
}

TEST(WaitLine, RedrawsInPlaceAndClearsTheLineAtTheEnd) {
  std::ostringstream err;
  int lookups = 0;
  {
    WaitLine line(
        err, "jobs/a", "s-me",
        [&lookups] {
          ++lookups;
          return client::KeyState{{holder("alice", 41, HoldMode::kExclusive)},
                                  {waiter(1, ""), waiter(2, "s-me")}};
        },
        SteadyClock::now(), milliseconds(0));
    ASSERT_TRUE(client::testing::wait_until([&] { return lookups > 0; }, milliseconds(10'000)));
  }
  const std::string text = err.str();
  EXPECT_EQ(text.rfind(
                "\r\x1b[Kdlock: waiting for jobs/a: held by alice (token 41); 1 ahead; waited ", 0),
            0U)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\x1b[K");
  EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(WaitLine, AnAcquireGrantedBeforeTheFirstDrawPrintsNothing) {
  std::ostringstream err;
  {
    WaitLine line(
        err, "k", "s", [] { return client::KeyState{}; }, SteadyClock::now());
  }
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace dlock::cli
