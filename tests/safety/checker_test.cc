// The checker's own negative controls: a history that breaks each invariant is reported.

#include <gtest/gtest.h>

#include "safety/checker.h"

namespace dlock::safety {
namespace {

Operation op(const std::string& kind, const std::string& key, std::int64_t start, std::int64_t end,
             std::uint64_t token, Outcome outcome = Outcome::kOk, const std::string& payout = "") {
  Operation result;
  result.process = "p";
  result.session = "s";
  result.key = key;
  result.kind = kind;
  result.start_ns = start;
  result.end_ns = end;
  result.token = token;
  result.outcome = outcome;
  result.payout = payout;
  return result;
}

TEST(SafetyChecker, CleanHistoryPasses) {
  History history;
  history.add(op("acquire", "k", 0, 10, 5));
  history.add(op("acquire", "k", 20, 30, 7));
  history.add(op("write", "b", 31, 40, 7, Outcome::kOk, "1"));
  history.add(op("write", "b", 41, 50, 7, Outcome::kOk, "2"));
  LedgerSnapshot ledger{.payouts = {"1", "2"}, .tokens_by_payout = {{"1", {7}}, {"2", {7}}}};
  EXPECT_TRUE(check("clean", history, &ledger).ok());
}

TEST(SafetyChecker, I1DuplicateAndDecreasingTokens) {
  History history;
  history.add(op("acquire", "k", 0, 10, 5));
  history.add(op("acquire", "k", 20, 30, 5));
  history.add(op("acquire", "k", 40, 50, 4));
  history.add(op("acquire", "k", 60, 70, 9, Outcome::kFail));  // not a grant: ignored
  const auto report = check("i1", history, nullptr);
  EXPECT_TRUE(report.has("I1"));
  EXPECT_GE(report.violations.size(), 3u);
}

TEST(SafetyChecker, OverlappingGrantsAreNotOrdered) {
  History history;
  history.add(op("acquire", "k", 0, 30, 9));
  history.add(op("acquire", "k", 10, 40, 5));  // concurrent with the first: any order is fine
  EXPECT_TRUE(check("overlap", history, nullptr).ok());
}

TEST(SafetyChecker, I2StaleAccept) {
  History history;
  history.add(op("write", "b", 0, 10, 8, Outcome::kOk, "1"));
  history.add(op("write", "b", 20, 30, 6, Outcome::kOk, "2"));
  auto rejected = op("write", "b", 40, 50, 3, Outcome::kFail, "3");
  rejected.rejected = true;
  history.add(rejected);
  const auto report = check("i2", history, nullptr);
  EXPECT_TRUE(report.has("I2"));
  EXPECT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.rejected_writes, 1u);
}

TEST(SafetyChecker, I3DoubleAndMissingPayout) {
  History history;
  LedgerSnapshot ledger{.payouts = {"1", "2"}, .tokens_by_payout = {{"1", {7, 6}}}};
  const auto report = check("i3", history, &ledger);
  EXPECT_TRUE(report.has("I3"));
  EXPECT_EQ(report.violations.size(), 2u);
}

TEST(SafetyChecker, I4AcknowledgedWriteMissing) {
  History history;
  history.add(op("write", "b", 0, 10, 8, Outcome::kOk, "1"));
  LedgerSnapshot ledger{.payouts = {"1"}, .tokens_by_payout = {{"1", {9}}}};
  EXPECT_TRUE(check("i4", history, &ledger).has("I4"));
}

Operation promised(const std::string& kind, const std::string& session, std::int64_t start,
                   std::int64_t end, std::uint64_t token, std::int64_t until) {
  auto result = op(kind, "k", start, end, token);
  result.session = session;
  result.promised_until_ns = until;
  return result;
}

// The checker's negative control for I5: a grant acknowledged inside another holder's promised
// lifetime (the etcd extend that promised more than its lease kept looked like this).
TEST(SafetyChecker, I5GrantInsideAnotherHoldersPromisedLifetime) {
  History history;
  history.add(promised("acquire", "a", 0, 10, 5, 1000));
  history.add(promised("acquire", "b", 20, 900, 7, 2000));  // granted by 900 < 1000
  const auto report = check("i5", history, nullptr);
  EXPECT_TRUE(report.has("I5"));
  EXPECT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.promises, 2u);
}

TEST(SafetyChecker, I5ExtendMovesThePromise) {
  History history;
  history.add(promised("acquire", "a", 0, 10, 5, 1000));
  history.add(promised("extend", "a", 500, 510, 5, 4000));
  history.add(promised("acquire", "b", 20, 3000, 7, 5000));
  EXPECT_TRUE(check("i5-extend", history, nullptr).has("I5"));
  // An extend that failed promised nothing.
  History refused;
  refused.add(promised("acquire", "a", 0, 10, 5, 1000));
  auto late = promised("extend", "a", 500, 510, 5, 4000);
  late.outcome = Outcome::kFail;
  refused.add(late);
  refused.add(promised("acquire", "b", 20, 3000, 7, 5000));
  EXPECT_TRUE(check("i5-refused-extend", refused, nullptr).ok());
}

TEST(SafetyChecker, I5GrantAfterThePromiseOrAReleaseOrByTheSameSessionIsFine) {
  History history;
  history.add(promised("acquire", "a", 0, 10, 5, 1000));
  history.add(promised("acquire", "b", 20, 1001, 7, 2000));  // after a's promise
  auto release = op("release", "k", 1500, 1510, 7, Outcome::kUnknown);
  release.session = "b";
  history.add(release);
  history.add(promised("acquire", "c", 1505, 1600, 9, 3000));   // b released first
  history.add(promised("acquire", "c", 1700, 1710, 11, 4000));  // c's own re-entrant acquire
  const auto report = check("i5-clean", history, nullptr);
  EXPECT_TRUE(report.ok()) << report.violations.front();
}

// Readers of a read-write lock hold at once: overlapping shared grants break no promise; an
// exclusive grant inside a reader's promise still does.
TEST(SafetyChecker, I5SharedGrantsMayOverlapEachOtherNotAWriter) {
  History history;
  auto reader = [](const std::string& session, std::int64_t start, std::int64_t end,
                   std::uint64_t token, std::int64_t until) {
    auto result = promised("acquire", session, start, end, token, until);
    result.shared = true;
    return result;
  };
  history.add(reader("r1", 0, 10, 5, 1000));
  history.add(reader("r2", 20, 30, 7, 1100));
  EXPECT_TRUE(check("i5-readers", history, nullptr).ok());
  history.add(promised("acquire", "w", 40, 500, 9, 2000));  // a writer inside both promises
  const auto report = check("i5-writer-among-readers", history, nullptr);
  EXPECT_TRUE(report.has("I5"));
  EXPECT_EQ(report.violations.size(), 2u);
}

// The clean history of a paused writer under readers (docs/fencing.md): the writer's write
// after the readers is refused, and its later grant writes with a token above theirs; a write
// that overlaps a read, or that ended before it, is no violation.
TEST(SafetyChecker, I6CleanWhenWritesAfterAReadOutrankIt) {
  History history;
  history.add(op("write", "b", 0, 10, 5, Outcome::kOk, "1"));  // the writer, before its pause
  history.add(op("read", "b", 20, 30, 7));                     // readers, greater tokens
  history.add(op("read", "b", 25, 35, 8));
  auto refused = op("write", "b", 40, 50, 5, Outcome::kFail, "2");  // the writer wakes
  refused.rejected = true;
  history.add(refused);
  history.add(op("write", "b", 60, 70, 11, Outcome::kOk, "2"));  // its next grant
  history.add(op("write", "b", 28, 80, 6, Outcome::kOk, "3"));   // overlaps a read: unordered
  const auto report = check("i6-clean", history, nullptr);
  EXPECT_TRUE(report.ok()) << report.violations.front();
  EXPECT_EQ(report.reads, 2u);
  EXPECT_EQ(report.rejected_writes, 1u);
}

// The bad outcome: a stale writer's write accepted after a reader with a greater token read.
// I2 does not see it (no write with a greater token came before), nor I3 (paid once).
TEST(SafetyChecker, I6WriteBelowAnAdmittedReadersToken) {
  History history;
  history.add(op("write", "b", 0, 10, 5, Outcome::kOk, "1"));
  history.add(op("read", "b", 20, 30, 7));
  history.add(op("read", "b", 32, 38, 9, Outcome::kFail));  // a refused read admits nothing
  history.add(op("write", "b", 40, 50, 5, Outcome::kOk, "2"));
  history.add(op("read", "other", 20, 30, 70));  // another resource's reader: not comparable
  LedgerSnapshot ledger{.payouts = {"1", "2"}, .tokens_by_payout = {{"1", {5}}, {"2", {5}}}};
  const auto report = check("i6", history, &ledger);
  EXPECT_TRUE(report.has("I6"));
  EXPECT_EQ(report.violations.size(), 1u) << report.violations.front();
  EXPECT_FALSE(report.has("I2"));
  EXPECT_FALSE(report.has("I3"));
}

}  // namespace
}  // namespace dlock::safety
