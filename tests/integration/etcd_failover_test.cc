// The etcd store against a three-member etcd cluster on loopback: kill -9 the leader while
// clients acquire, and check what a fencing token promises across a leader election. What the
// client saw (time without a leader, errors, tokens before and after) is printed for the log.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

long long ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

struct Observation {
  std::string key;
  Clock::time_point started;
  Clock::time_point at;
  bool granted = false;
  FencingToken token = 0;
  std::string error;  // error code name when not granted
};

TEST(EtcdFailoverTest, LeaderKillDuringAcquiresNeverRepeatsOrLowersATokenAndRecovers) {
  testing::EtcdCluster cluster(3);
  const auto first_leader = cluster.leader();
  ASSERT_TRUE(first_leader.has_value());
  auto store =
      store::etcd::make_etcd_store({cluster.endpoints(), milliseconds(1500), TtlLimits{}, {}});
  constexpr int kClients = 3;
  std::vector<SessionInfo> sessions;
  for (int i = 0; i < kClients; ++i) {
    sessions.push_back(store->open_session("client-" + std::to_string(i), seconds(60)));
  }

  std::mutex mutex;
  std::vector<Observation> observations;  // in completion order, under mutex
  std::atomic<bool> stop{false};
  std::atomic<int> counter{0};
  auto client = [&](int index) {
    while (!stop.load()) {
      // A fresh key (the CreateRevision == 0 path), then, once granted, the same key again
      // (the re-entrant path: a new, greater token for the same key).
      const std::string key = "failover/k-" + std::to_string(counter++);
      for (int attempt = 0; attempt < 2 && !stop.load(); ++attempt) {
        Observation seen;
        seen.key = key;
        seen.started = Clock::now();
        try {
          const auto handle =
              store->try_grant(key, sessions[index].owner_id, sessions[index].session_id,
                               GrantRequest::exclusive(seconds(30)));
          if (!handle) {
            seen.error = "held";  // impossible for a fresh key or its own grant; asserted below
          } else {
            seen.granted = true;
            seen.token = handle->fencing_token;
          }
        } catch (const Error& error) {
          seen.error = to_string(error.code());
        }
        seen.at = Clock::now();
        std::lock_guard lock(mutex);
        observations.push_back(seen);
        if (!seen.granted) break;
      }
    }
  };
  auto granted_count = [&] {
    std::lock_guard lock(mutex);
    return std::count_if(observations.begin(), observations.end(),
                         [](const Observation& o) { return o.granted; });
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) threads.emplace_back(client, i);
  ASSERT_TRUE(testing::wait_for([&] { return granted_count() >= 30; }, seconds(30)));

  const auto killed_at = Clock::now();
  cluster.kill(*first_leader);
  const auto grants_at_kill = granted_count();
  std::optional<int> new_leader;
  ASSERT_TRUE(testing::wait_for([&] { return (new_leader = cluster.leader()).has_value(); },
                                seconds(30), milliseconds(10)))
      << "no new leader within 30 s";
  const auto elected_at = Clock::now();
  // Acquires go on until plenty succeeded after the election.
  ASSERT_TRUE(
      testing::wait_for([&] { return granted_count() >= grants_at_kill + 30; }, seconds(60)));
  stop = true;
  for (auto& thread : threads) thread.join();

  // Tokens of successful grants must strictly increase per key in the order the grants returned
  // (one client per key, so its grants are sequential), across the election too. Grants of
  // different keys carry the same token only when etcd applied them in one batched Txn
  // (docs/adr/0023-etcd-batched-txns.md), so only when their calls overlapped in time: a token
  // repeated by calls that did not overlap would be a revision handed out twice.
  std::map<std::string, std::vector<FencingToken>> by_key;
  std::map<FencingToken, std::vector<const Observation*>> by_token;
  std::vector<FencingToken> before;
  std::vector<FencingToken> after;
  std::map<std::string, int> errors;
  std::optional<Clock::time_point> first_error;
  std::optional<Clock::time_point> first_grant_after_kill;
  std::optional<Clock::time_point> first_grant_sent_after_kill;
  FencingToken max_before = 0;
  for (const auto& seen : observations) {
    if (!seen.granted) {
      ++errors[seen.error];
      if (!first_error && seen.at >= killed_at) first_error = seen.at;
      continue;
    }
    by_key[seen.key].push_back(seen.token);
    by_token[seen.token].push_back(&seen);
    if (seen.at < killed_at) {
      before.push_back(seen.token);
      max_before = std::max(max_before, seen.token);
    } else {
      if (!first_grant_after_kill) first_grant_after_kill = seen.at;
      // Requested after the kill: committed after every grant answered before it. (A request
      // in flight across the kill may have been committed before a grant answered before the
      // kill, so its token may be lower; it must still be unique, checked below.)
      if (seen.started >= killed_at) {
        after.push_back(seen.token);
        if (!first_grant_sent_after_kill) first_grant_sent_after_kill = seen.at;
      }
    }
  }
  for (const auto& [key, tokens] : by_key) {
    for (std::size_t i = 1; i < tokens.size(); ++i) {
      EXPECT_GT(tokens[i], tokens[i - 1])
          << "key " << key << ": a later grant's token is not greater";
    }
  }
  std::size_t shared_tokens = 0;
  for (const auto& [token, grants] : by_token) {
    if (grants.size() > 1) ++shared_tokens;
    for (std::size_t i = 0; i < grants.size(); ++i) {
      for (std::size_t j = i + 1; j < grants.size(); ++j) {
        const bool overlapped =
            grants[i]->started <= grants[j]->at && grants[j]->started <= grants[i]->at;
        EXPECT_TRUE(overlapped) << "token " << token << " was issued to " << grants[i]->key
                                << " and " << grants[j]->key << " by calls that did not overlap";
      }
    }
  }
  EXPECT_EQ(errors.count("held"), 0u) << "a fresh key was reported held";
  ASSERT_FALSE(after.empty());
  for (const auto token : after) {
    EXPECT_GT(token, max_before) << "a grant requested after the kill got a token not above "
                                    "every grant answered before it";
  }

  std::cout << "--- etcd leader kill -9 (member " << *first_leader << " of 3) ---\n"
            << "new leader: member " << *new_leader << " after "
            << ms_between(killed_at, elected_at) << " ms (as seen by polling Maintenance.Status)\n";
  if (first_grant_after_kill) {
    std::cout << "first grant answered after the kill: "
              << ms_between(killed_at, *first_grant_after_kill) << " ms (may have been committed "
              << "before it)\n";
  }
  if (first_grant_sent_after_kill) {
    std::cout << "first grant requested after the kill: "
              << ms_between(killed_at, *first_grant_sent_after_kill)
              << " ms after the kill (the client-side time without a leader)\n";
  }
  if (first_error) {
    std::cout << "first error after the kill: " << ms_between(killed_at, *first_error) << " ms\n";
  }
  std::cout << "errors seen by clients:";
  if (errors.empty()) std::cout << " none";
  for (const auto& [code, count] : errors) std::cout << " " << code << "=" << count;
  std::cout << "\nlast tokens before the kill:";
  for (std::size_t i = before.size() > 5 ? before.size() - 5 : 0; i < before.size(); ++i) {
    std::cout << " " << before[i];
  }
  std::cout << "\nfirst tokens after the kill:";
  for (std::size_t i = 0; i < std::min<std::size_t>(after.size(), 5); ++i) {
    std::cout << " " << after[i];
  }
  std::cout << "\ngrants: " << before.size() << " before, " << after.size() << " after; "
            << shared_tokens << " tokens shared by grants of different keys in one batch\n";

  // The survivors keep serving sessions and releases, and a restarted member rejoins.
  EXPECT_NO_THROW(store->heartbeat(sessions[0].session_id));
  cluster.start(*first_leader);
  const auto rejoined =
      store->try_grant("failover/after-rejoin", sessions[0].owner_id, sessions[0].session_id,
                       GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(rejoined.has_value());
  EXPECT_GT(rejoined->fencing_token, max_before);
}

}  // namespace
}  // namespace dlock
