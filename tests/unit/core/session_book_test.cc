// Unit tests of core::SessionBook (ADR-0007): owners, the server-wide and per-principal caps,
// expired sessions pruned only at a cap and each once, and the sessions the reaper must ask
// the store about.

#include "core/session_book.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace dlock::core {
namespace {

using namespace std::chrono_literals;

const WallClock::time_point kNow = WallClock::time_point(std::chrono::hours(24 * 365 * 50));

TEST(SessionBook, RemembersOwnersAndForgetsThem) {
  SessionBook book(SessionLimits{});
  EXPECT_FALSE(book.owner("s1"));
  book.remember_owner("s1", "alice");
  EXPECT_EQ(book.owner("s1"), "alice");
  EXPECT_FALSE(book.forget("s1")) << "seen, but not opened through this server";
  EXPECT_FALSE(book.owner("s1"));
}

TEST(SessionBook, RefusesAtTheServerWideCapNamingTheLimit) {
  SessionBook book(SessionLimits{2, 0});
  EXPECT_TRUE(book.check_capacity("", kNow).refusal.empty());
  EXPECT_TRUE(book.add("s1", "", kNow + 30s));
  EXPECT_FALSE(book.add("s1", "", kNow + 60s)) << "recorded once";
  EXPECT_TRUE(book.add("s2", "", kNow + 30s));
  const auto full = book.check_capacity("", kNow);
  EXPECT_EQ(full.refusal, "too many open sessions (limit 2)");
  EXPECT_EQ(full.pruned, 0U);
  EXPECT_TRUE(book.forget("s1"));
  EXPECT_TRUE(book.check_capacity("", kNow).refusal.empty()) << "a closed session frees room";
  EXPECT_EQ(book.size(), 1U);
}

TEST(SessionBook, SessionsThatExpiredUnseenArePrunedAtTheCapAfterAGracePeriod) {
  SessionBook book(SessionLimits{2, 0});
  book.add("old", "", kNow - 10s);
  book.add("recent", "", kNow - 1s);  // within the grace period for clock skew
  const auto capacity = book.check_capacity("", kNow);
  EXPECT_TRUE(capacity.refusal.empty());
  EXPECT_EQ(capacity.pruned, 1U);
  EXPECT_EQ(book.size(), 1U);
  EXPECT_FALSE(book.forget("old")) << "already pruned";
  book.add("new", "", kNow + 30s);
  EXPECT_FALSE(book.check_capacity("", kNow).refusal.empty());
}

TEST(SessionBook, ARenewedSessionIsNotPruned) {
  SessionBook book(SessionLimits{1, 0});
  book.add("s1", "", kNow - 10s);
  book.renew("s1", kNow + 30s);
  const auto capacity = book.check_capacity("", kNow);
  EXPECT_EQ(capacity.pruned, 0U);
  EXPECT_FALSE(capacity.refusal.empty());
  book.renew("unknown", kNow + 30s);  // opened elsewhere: nothing to renew
  EXPECT_EQ(book.size(), 1U);
}

TEST(SessionBook, CountsPerPrincipalAndRefusesAtThePrincipalsLimitNamingIt) {
  SessionBook book(SessionLimits{100, 2});
  book.add("a1", "alice", kNow + 30s);
  book.add("a2", "alice", kNow + 30s);
  book.add("b1", "bob", kNow + 30s);
  EXPECT_EQ(book.count_of("alice"), 2U);
  EXPECT_EQ(book.count_of("bob"), 1U);
  EXPECT_EQ(book.check_capacity("alice", kNow).refusal,
            "too many open sessions for principal alice (limit 2)");
  EXPECT_TRUE(book.check_capacity("bob", kNow).refusal.empty());
  book.forget("a1");
  EXPECT_EQ(book.count_of("alice"), 1U);
  EXPECT_TRUE(book.check_capacity("alice", kNow).refusal.empty());
}

TEST(SessionBook, APrincipalAtItsLimitHasItsExpiredSessionsPruned) {
  SessionBook book(SessionLimits{100, 1});
  book.add("a1", "alice", kNow - 10s);
  const auto capacity = book.check_capacity("alice", kNow);
  EXPECT_EQ(capacity.pruned, 1U);
  EXPECT_TRUE(capacity.refusal.empty());
  EXPECT_EQ(book.count_of("alice"), 0U);
}

// Opens run concurrently on the workers: the check and the place it found are one step, so
// opens racing for the last place cannot all pass the cap before any of them is added.
TEST(SessionBook, AReservedPlaceCountsUntilItIsAddedOrReleased) {
  SessionBook book(SessionLimits{1, 0});
  EXPECT_TRUE(book.reserve("", kNow).refusal.empty());
  EXPECT_EQ(book.reserve("", kNow).refusal, "too many open sessions (limit 1)")
      << "the place is held while the first open is under way";
  book.release_reservation("");  // that open failed
  EXPECT_TRUE(book.reserve("", kNow).refusal.empty());
  EXPECT_TRUE(book.add("s1", "", kNow + 30s, true));
  EXPECT_EQ(book.size(), 1U);
  EXPECT_FALSE(book.reserve("", kNow).refusal.empty()) << "the session took the place";
  EXPECT_TRUE(book.forget("s1"));
  EXPECT_TRUE(book.reserve("", kNow).refusal.empty()) << "its reservation was spent by add";
}

TEST(SessionBook, AReservedPlaceCountsAgainstItsPrincipalsLimit) {
  SessionBook book(SessionLimits{100, 1});
  EXPECT_TRUE(book.reserve("alice", kNow).refusal.empty());
  EXPECT_EQ(book.reserve("alice", kNow).refusal,
            "too many open sessions for principal alice (limit 1)");
  EXPECT_TRUE(book.reserve("bob", kNow).refusal.empty());
  EXPECT_TRUE(book.add("a1", "alice", kNow + 30s, true));
  EXPECT_EQ(book.count_of("alice"), 1U);
  EXPECT_FALSE(book.reserve("alice", kNow).refusal.empty());
}

TEST(SessionBook, ConcurrentReservationsNeverPassTheCap) {
  constexpr int kThreads = 16;
  SessionBook book(SessionLimits{100, 5});
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&book, &admitted] {
      if (book.reserve("alice", kNow).refusal.empty()) ++admitted;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(admitted.load(), 5);
}

// The cap check is O(1): with the book full of live sessions, a rejected open only looks at the
// earliest expiry (17.6 ms per rejection with 100k sessions when it scanned them all).
TEST(SessionBook, RejectionsAtAFullCapDoNotScanTheSessions) {
  constexpr std::size_t kSessions = 100000;
  SessionBook book(SessionLimits{kSessions, 0});
  for (std::size_t i = 0; i < kSessions; ++i) {
    book.add("s" + std::to_string(i), "", kNow + 60s);
  }
  const auto started = std::chrono::steady_clock::now();
  constexpr int kRejections = 10000;
  for (int i = 0; i < kRejections; ++i) {
    ASSERT_FALSE(book.check_capacity("", kNow).refusal.empty());
  }
  const auto per_rejection = (std::chrono::steady_clock::now() - started) / kRejections;
  std::cout << "one rejection at a full cap of " << kSessions << " sessions: "
            << std::chrono::duration_cast<std::chrono::nanoseconds>(per_rejection).count()
            << " ns\n";
  EXPECT_LT(per_rejection, 100us) << "a scan of 100k sessions takes milliseconds";
}

TEST(SessionBook, TheReaperAsksAboutWaitingSessionsItCannotVouchFor) {
  SessionBook book(SessionLimits{});
  book.add("live", "", kNow + 30s);
  book.add("lapsed", "", kNow - 1s);
  const auto unsure = book.unsure({"live", "lapsed", "elsewhere"}, kNow);
  EXPECT_EQ(unsure, (std::vector<std::string>{"lapsed", "elsewhere"}));
}

}  // namespace
}  // namespace dlock::core
