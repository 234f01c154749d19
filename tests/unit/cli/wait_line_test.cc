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
  // Once the waiters API tells the position (the HOOK in wait_line.cc).
  EXPECT_EQ(waiting_line("jobs/a", one, 2, milliseconds(0)),
            "dlock: waiting for jobs/a: held by alice (token 41); 2 ahead; waited 0s");
}

TEST(WaitLine, RedrawsInPlaceAndClearsTheLineAtTheEnd) {
  std::ostringstream err;
  int lookups = 0;
  {
    WaitLine line(
        err, "jobs/a",
        [&lookups] {
          ++lookups;
          return std::vector<LockInfo>{holder("alice", 41, HoldMode::kExclusive)};
        },
        SteadyClock::now(), milliseconds(0));
    ASSERT_TRUE(client::testing::wait_until([&] { return lookups > 0; }, milliseconds(10'000)));
  }
  const std::string text = err.str();
  EXPECT_EQ(text.rfind("\r\x1b[Kdlock: waiting for jobs/a: held by alice (token 41); waited ", 0),
            0U)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\x1b[K");
  EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(WaitLine, AnAcquireGrantedBeforeTheFirstDrawPrintsNothing) {
  std::ostringstream err;
  {
    WaitLine line(
        err, "k", [] { return std::vector<LockInfo>{}; }, SteadyClock::now());
  }
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace dlock::cli
