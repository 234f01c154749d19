// End to end through a real dlockd process, on every backend: concurrency, waiting, hand-over
// and expiry (C3, ADR-0007), and the waiters of ended sessions.

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <boost/json.hpp>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_e2e_fixture.h"

namespace dlock::e2e {
namespace {

TEST_P(ServerEndToEnd, ThirtyTwoClientsRaceOneKeyOneGrantPerRound) {
  constexpr int kClients = 32;
  constexpr int kRounds = 5;
  std::vector<std::string> sessions;
  for (int i = 0; i < kClients; ++i)
    sessions.push_back(open_session("client-" + std::to_string(i)));
  const auto key = fresh_key();
  std::uint64_t last = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<HttpResult> results(kClients);
    std::barrier start(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        results[i] = acquire(key, sessions[i]);
      });
    }
    for (auto& thread : threads) thread.join();
    int granted = -1;
    for (int i = 0; i < kClients; ++i) {
      if (results[i].status == 200) {
        EXPECT_EQ(granted, -1) << "round " << round << ": two grants";
        granted = i;
      } else {
        EXPECT_EQ(results[i].status, 409) << results[i].body;
        EXPECT_EQ(results[i].error_code(), "held");
      }
    }
    ASSERT_NE(granted, -1) << "round " << round << ": nobody got the lock";
    const auto token = token_of(results[granted]);
    EXPECT_GT(token, last);
    last = token;
    ASSERT_EQ(release(key, sessions[granted], token).status, 204);
  }
}

// Who waits (C3 "Waiters", issue 41): GET /v1/locks/{key} lists the acquires queued on this
// dlockd in order, with owner, mode and how long each has waited; a granted waiter leaves it.
TEST_P(ServerEndToEnd, ReadShowsTheWaitersInQueueOrder) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto carol = open_session("carol");
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult bob_result, carol_result;
  std::thread bob_waits([&] { bob_result = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  std::thread carol_waits([&] {
    carol_result = call("POST", "/v1/locks/" + key + "/acquire",
                        json::serialize(json::object{
                            {"session_id", carol}, {"wait_ms", 20000}, {"mode", "shared"}}));
  });
  ASSERT_TRUE(wait_for_waiters(2));

  const auto read = call("GET", "/v1/locks/" + key);
  ASSERT_EQ(read.status, 200) << read.body;
  const auto& waiters = read.json.at("waiters").as_array();
  ASSERT_EQ(waiters.size(), 2u) << read.body;
  EXPECT_EQ(waiters[0].at("position").to_number<int>(), 1);
  EXPECT_EQ(waiters[0].at("owner").as_string(), "bob");
  EXPECT_EQ(waiters[0].at("mode").as_string(), "exclusive");
  EXPECT_EQ(waiters[0].at("session_id").as_string(), bob);
  EXPECT_GE(waiters[0].at("waiting_ms").to_number<std::int64_t>(),
            waiters[1].at("waiting_ms").to_number<std::int64_t>())
      << "the head has waited less than the one behind it";
  EXPECT_EQ(waiters[1].at("position").to_number<int>(), 2);
  EXPECT_EQ(waiters[1].at("owner").as_string(), "carol");
  EXPECT_EQ(waiters[1].at("mode").as_string(), "shared");
  // The list counts them (C3 GET /v1/locks "waiting"), in its namespace and in every one.
  const auto waiting_in = [&](const std::string& target) {
    const auto listed = call("GET", target);
    EXPECT_EQ(listed.status, 200) << listed.body;
    for (const auto& lock : listed.json.at("locks").as_array()) {
      if (lock.at("key").as_string() != key) continue;
      if (target.find("all_namespaces") != std::string::npos) {
        EXPECT_EQ(lock.at("ns").as_string(), "default") << listed.body;
      }
      return lock.at("waiting").to_number<int>();
    }
    ADD_FAILURE() << key << " not listed by " << target << ": " << listed.body;
    return -1;
  };
  EXPECT_EQ(waiting_in("/v1/locks?prefix=" + key), 2);
  EXPECT_EQ(waiting_in("/v1/locks?all_namespaces=true&limit=1000"), 2);

  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  bob_waits.join();
  ASSERT_EQ(bob_result.status, 200) << bob_result.body;
  const auto after = call("GET", "/v1/locks/" + key);
  ASSERT_EQ(after.json.at("waiters").as_array().size(), 1u) << after.body;
  EXPECT_EQ(after.json.at("waiters").at(0).at("owner").as_string(), "carol");
  EXPECT_EQ(after.json.at("waiters").at(0).at("position").to_number<int>(), 1);
  ASSERT_EQ(release(key, bob, token_of(bob_result)).status, 204);
  carol_waits.join();
  EXPECT_EQ(carol_result.status, 200) << carol_result.body;
  EXPECT_TRUE(call("GET", "/v1/locks/" + key).json.at("waiters").as_array().empty());
}

TEST_P(ServerEndToEnd, WaiterIsGrantedOnReleaseWithAGreaterToken) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json.at("session_id").as_string(), bob);
  EXPECT_GT(token_of(waited), token_of(held));
}

// "lease": "session" (C3, ADR-0018): no TTL of its own, the session's lifetime answered; closing
// the session releases it to a waiting session-bound acquire, which gets a greater token; extend
// changes nothing and answers the session's lifetime.
TEST_P(ServerEndToEnd, SessionBoundLockLivesAndDiesWithItsSession) {
  const auto alice = open_session("alice", 60000);
  const auto bob = open_session("bob", 60000);
  const auto key = fresh_key();
  const auto target = "/v1/locks/" + key + "/acquire";
  const auto both =
      call("POST", target, R"({"session_id":")" + alice + R"(","lease":"session","ttl_ms":5000})");
  EXPECT_EQ(both.status, 400);
  EXPECT_EQ(both.json.at("error").at("field").as_string(), "ttl_ms");
  const auto bogus = call("POST", target, R"({"session_id":")" + alice + R"(","lease":"forever"})");
  EXPECT_EQ(bogus.status, 400);
  EXPECT_EQ(bogus.json.at("error").at("field").as_string(), "lease");

  const auto held = call("POST", target, R"({"session_id":")" + alice + R"(","lease":"session"})");
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_EQ(held.json.at("lease").as_string(), "session");
  EXPECT_GT(held.json.at("ttl_ms").as_int64(), 50000);
  EXPECT_LE(held.json.at("ttl_ms").as_int64(), 60000);
  EXPECT_EQ(call("GET", "/v1/locks/" + key).json.at("lease").as_string(), "session");

  HttpResult waited;
  std::thread waiter([&] {
    waited = call("POST", target,
                  R"({"session_id":")" + bob + R"(","lease":"session","wait_ms":20000})");
  });
  ASSERT_TRUE(wait_for_waiters(1));
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + alice).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json.at("session_id").as_string(), bob);
  EXPECT_EQ(waited.json.at("lease").as_string(), "session");
  EXPECT_GT(token_of(waited), token_of(held));

  const auto extended = call("POST", "/v1/locks/" + key + "/extend",
                             R"({"session_id":")" + bob + R"(","fencing_token":)" +
                                 std::to_string(token_of(waited)) + R"(,"ttl_ms":5000})");
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_EQ(token_of(extended), token_of(waited));
  EXPECT_EQ(extended.json.at("lease").as_string(), "session");
  EXPECT_GT(extended.json.at("ttl_ms").as_int64(), 50000) << "the session's, not the 5 s asked";
}

TEST_P(ServerEndToEnd, HolderReacquiresWhileOthersWait) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  // Re-entrant: the holder does not queue behind a waiter that waits for its own lock.
  const auto again = acquire(key, alice);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(token_of(again), token_of(held));
  ASSERT_EQ(release(key, alice, token_of(again)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(again));
}

TEST_P(ServerEndToEnd, WaiterCapAnswers429AndTheServerCarriesOn) {
  DlockdProcess capped(options({"--server-max-waiters", "1"}));
  const auto alice = open_session("alice", 60000, &capped);
  const auto bob = open_session("bob", 60000, &capped);
  const auto carol = open_session("carol", 60000, &capped);
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 30000, 0, &capped);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000, &capped); });
  ASSERT_TRUE(wait_for_waiters(1, &capped));
  const auto refused = acquire(key, carol, 30000, 5000, &capped);
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.error_code(), "too_many_requests");
  EXPECT_EQ(refused.headers.count("retry-after"), 1u);
  EXPECT_EQ(call("GET", "/healthz", "", {}, &capped).status, 200);
  ASSERT_EQ(release(key, alice, token_of(held), &capped).status, 204);
  waiter.join();
  EXPECT_EQ(waited.status, 200) << waited.body;
}

// The value of a counter or gauge line "name{backend=\"...\"} value" in /metrics.
double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  const auto space = text.find(' ', at + 1);
  return std::stod(text.substr(space + 1, text.find('\n', space) - space - 1));
}

TEST_P(ServerEndToEnd, HotKeyWaitersDoNotHerdTheBackend) {
  constexpr int kWaiters = 16;
  const auto alice = open_session("alice");
  std::vector<std::string> sessions;
  for (int i = 0; i < kWaiters; ++i) sessions.push_back(open_session("w" + std::to_string(i)));
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  const double before =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total");
  ASSERT_GE(before, 0);
  // Each waiter releases as soon as it is granted, handing the lock down the queue.
  std::vector<std::uint64_t> tokens(kWaiters, 0);
  std::vector<int> release_status(kWaiters, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      const auto granted = acquire(key, sessions[i], 30000, 30000);
      if (granted.status != 200) return;
      tokens[i] = token_of(granted);
      // The granted token must be the live grant: releasing it works.
      release_status[i] = release(key, sessions[i], tokens[i]).status;
    });
  }
  ASSERT_TRUE(wait_for_waiters(kWaiters));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  for (auto& thread : threads) thread.join();
  std::set<std::uint64_t> distinct(tokens.begin(), tokens.end());
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kWaiters)) << "every waiter granted once";
  EXPECT_EQ(distinct.count(0), 0u);
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(release_status[i], 204) << "waiter " << i << " was answered a superseded token";
  }
  const double attempts =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total") - before;
  // One attempt by the first head while held, then one hand-over per release: about one
  // backend write per grant, not one per waiter per release.
  EXPECT_LE(attempts, kWaiters + 3) << "backend writes for " << kWaiters << " grants";
  EXPECT_GE(attempts, kWaiters);
}

// A holder keeps extending past its first expiry while bob waits. The lock's reported expiry
// must follow the extends (on etcd the grant's record keeps its first expiry: an extend renews
// the lease without rewriting the key, ADR-0011), or the waiter is woken for a retry every
// 10 ms -- one backend write each -- for as long as the holder extends.
TEST_P(ServerEndToEnd, ExtendedHolderDoesNotMakeItsWaitersPoll) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200) << held.body;
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  const double before =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total");
  // Four extends 500 ms apart: the lock lives about 2.5 s, 1.5 s past its first expiry.
  for (int i = 0; i < 4; ++i) {
    // Real time: the lock must outlive its first expiry on dlockd's clock.
    std::this_thread::sleep_for(milliseconds(500));
    const auto extended =
        call("POST", "/v1/locks/" + key + "/extend",
             json::serialize(json::object{
                 {"session_id", alice}, {"fencing_token", token_of(held)}, {"ttl_ms", 1000}}));
    ASSERT_EQ(extended.status, 200) << extended.body;
  }
  const double during =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total") - before;
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  std::cout << GetParam() << ": " << during << " backend acquire attempts while extended\n";
  EXPECT_LE(during, 10) << "backend acquire attempts for one waiter while the holder extended";
}

TEST_P(ServerEndToEnd, WaiterIsGrantedAtHolderExpiry) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200);
  const auto waited = acquire(key, bob, 30000, 20000);
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
}

TEST_P(ServerEndToEnd, WaiterGivesUpAfterWaitMsWith409) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice).status, 200);
  const auto waited = acquire(key, bob, 30000, 300);
  EXPECT_EQ(waited.status, 409);
  EXPECT_EQ(waited.error_code(), "held");
  EXPECT_TRUE(wait_for_waiters(0));
}

TEST_P(ServerEndToEnd, SessionExpiryReleasesItsLocks) {
  const auto alice = open_session("alice", 1000);  // never kept alive
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 60000);
  ASSERT_EQ(held.status, 200);
  const auto waited = acquire(key, bob, 30000, 20000);
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
  EXPECT_EQ(call("POST", "/v1/sessions/" + alice + "/keepalive").error_code(), "session_not_found");
}

// A waiter whose session ends while it waits is answered at once with 404 session_not_found (as
// any request of an ended session is, C3) and leaves the queue; the key is never granted to it.
class EndedSessionWaiter : public ServerEndToEnd {
 protected:
  void expect_dropped_at_once(const std::string& alice, const std::string& bob,
                              const std::function<void()>& end_bobs_session,
                              std::chrono::milliseconds promptly) {
    const auto key = fresh_key();
    const auto held = acquire(key, alice);
    ASSERT_EQ(held.status, 200);
    HttpResult waited;
    std::atomic<bool> answered{false};
    std::thread waiter([&] {
      waited = acquire(key, bob, 30000, 25000);
      answered = true;
    });
    ASSERT_TRUE(wait_for_waiters(1));
    end_bobs_session();
    EXPECT_TRUE(testing::wait_for([&] { return answered.load(); }, promptly))
        << "the waiter of an ended session stayed queued";
    EXPECT_TRUE(wait_for_waiters(0));
    ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
    waiter.join();
    EXPECT_EQ(waited.status, 404) << waited.body;
    EXPECT_EQ(waited.error_code(), "session_not_found");
    EXPECT_EQ(call("GET", "/v1/locks/" + key).error_code(), "lock_not_found");  // nobody's
  }
};

TEST_P(EndedSessionWaiter, ClosedSessionsWaiterIsAnsweredAtOnceAndNeverGranted) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  expect_dropped_at_once(
      alice, bob, [&] { ASSERT_EQ(call("DELETE", "/v1/sessions/" + bob).status, 204); },
      seconds(3));
}

TEST_P(EndedSessionWaiter, ExpiredSessionsWaiterIsAnsweredAtOnceAndNeverGranted) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob", 1000);  // never kept alive
  // Expiry (1 s) + the reaper's interval (1 s), far below the 25 s wait.
  expect_dropped_at_once(
      alice, bob, [] {}, seconds(8));
}

INSTANTIATE_TEST_SUITE_P(Backends, EndedSessionWaiter,
                         ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::e2e
