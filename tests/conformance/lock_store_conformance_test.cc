// The conformance matrix: every behaviour include/dlock/lock_store.h promises, tested once,
// parameterized over every backend this binary was built with. A backend is done when this
// whole suite is green against it. scripts/mutation-check proves the safety cases can fail.
// Over ~500 lines: one case per promise of the header's exclusive-lock operations; the other
// primitives already have files of their own (holder_set_, session_bound_, election_,
// lock_delay_conformance_test.cc).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "conformance/conformance_fixture.h"
#include "dlock/lock_store.h"
#include "support/backend_harness.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using conformance_test::kMinTtl;
using conformance_test::LockStoreConformance;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- Acquire (C1, C2): grant, held, re-entrant, takeover, increasing tokens, one winner ----------

TEST_P(LockStoreConformance, AcquireFreeKeyGrantsPositiveTokenAndLaterExpiry) {
  const auto key = fresh_key();
  const auto session = open("alice");
  const auto before = SteadyClock::now();
  const auto handle = acquire(key, session, seconds(30));
  EXPECT_GT(handle.fencing_token, 0u);
  EXPECT_EQ(handle.key, key);
  EXPECT_EQ(handle.owner_id, "alice");
  EXPECT_EQ(handle.session_id, session.session_id);
  // The client deadline counts from before the request was sent.
  EXPECT_GE(handle.client_deadline, before + seconds(30));
  EXPECT_LE(handle.client_deadline, SteadyClock::now() + seconds(30));
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_GT(info->expires_at, info->acquired_at);
  EXPECT_EQ(info->fencing_token, handle.fencing_token);
}

TEST_P(LockStoreConformance, ContendedKeyIsHeldAndStoredTokenUnchanged) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto handle = acquire(key, alice);
  EXPECT_FALSE(
      store_->try_grant(key, bob.owner_id, bob.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, handle.fencing_token);
  EXPECT_EQ(info->owner_id, "alice");
  EXPECT_EQ(info->session_id, alice.session_id);
}

TEST_P(LockStoreConformance, ReentrantAcquireMintsStrictlyGreaterTokenAndLaterExpiry) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto first = acquire(key, alice, seconds(5));
  const auto second = acquire(key, alice, seconds(50));
  EXPECT_GT(second.fencing_token, first.fencing_token);
  EXPECT_GT(second.server_expiry, first.server_expiry);
  EXPECT_GT(second.client_deadline, first.client_deadline);
  EXPECT_EQ(store_->read(key)->fencing_token, second.fencing_token);
}

TEST_P(LockStoreConformance, TakeoverOfExpiredLeaseMintsStrictlyGreaterToken) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto dead = acquire(key, alice, kMinTtl);
  wait_until_expired(key);
  // No reaper ran: the acquire itself takes the expired lease over.
  const auto taken =
      store_->try_grant(key, bob.owner_id, bob.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(taken.has_value());
  EXPECT_GT(taken->fencing_token, dead.fencing_token)
      << "a takeover re-issued the expired holder's token (C1 Warning 1)";
  EXPECT_EQ(store_->read(key)->owner_id, "bob");
}

TEST_P(LockStoreConformance, TokensStrictlyIncreaseAcrossAllGrants) {
  const auto alice = open("alice");
  const auto bob = open("bob");
  std::vector<FencingToken> tokens;
  for (int round = 0; round < 6; ++round) {
    const auto key = fresh_key(std::to_string(round % 2));
    const auto& session = round % 2 == 0 ? alice : bob;
    const auto handle = acquire(key, session);
    tokens.push_back(handle.fencing_token);
    tokens.push_back(acquire(key, session).fencing_token);  // re-entrant
    const auto again = store_->read(key);
    ASSERT_TRUE(again.has_value());
    ASSERT_TRUE(store_->delete_if_owner(
        GrantRef{key, session.owner_id, session.session_id, again->fencing_token}));
    tokens.push_back(acquire(key, round % 2 == 0 ? bob : alice).fencing_token);
  }
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "grant " << i << " (gaps are fine, decreases not)";
  }
}

TEST_P(LockStoreConformance, RacingThreadsOnFreeKeyYieldExactlyOneGrant) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  std::vector<SessionInfo> sessions;
  for (int i = 0; i < kThreads; ++i) sessions.push_back(open("racer-" + std::to_string(i)));
  std::set<FencingToken> all_tokens;
  for (int round = 0; round < kRounds; ++round) {
    const auto key = fresh_key("race");
    std::atomic<int> grants{0};
    std::vector<FencingToken> tokens(kThreads, 0);
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        const auto handle = store_->try_grant(key, sessions[i].owner_id, sessions[i].session_id,
                                              GrantRequest::exclusive(seconds(30)));
        if (handle) {
          ++grants;
          tokens[i] = handle->fencing_token;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_EQ(grants.load(), 1) << "round " << round << ": racing acquires of one free key";
    for (const auto token : tokens) {
      if (token != 0) {
        EXPECT_TRUE(all_tokens.insert(token).second) << "token reused";
      }
    }
  }
}

// --- Clock, extend, release -------------------------------------------------------------------

TEST_P(LockStoreConformance, ExpiryIsComputedByTheBackendClock) {
  // Both timestamps come from one reading of the backend's clock: their distance is exactly the
  // TTL. An expiry computed from the process clock would be off by the request's latency.
  const auto key = fresh_key();
  const auto handle = acquire(key, open("alice"), milliseconds(7321));
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(info->expires_at - info->acquired_at),
            milliseconds(7321));
  EXPECT_EQ(info->expires_at, handle.server_expiry);
}

TEST_P(LockStoreConformance, ExtendKeepsTokenAndMovesExpiry) {
  const auto key = fresh_key();
  const auto handle = acquire(key, open("alice"), seconds(5));
  const auto extended = store_->extend(handle.ref(), seconds(60));
  EXPECT_EQ(extended.fencing_token, handle.fencing_token);
  EXPECT_GT(extended.server_expiry, handle.server_expiry);
  EXPECT_GT(extended.client_deadline, handle.client_deadline);
  EXPECT_EQ(store_->read(key)->fencing_token, handle.fencing_token);
}

// An extend that asks for more than the grant's first TTL: the handle may promise less than
// was asked (an etcd lease renews for the TTL it was granted with), never more than the backend
// keeps. Measured: another session probing the key is not granted it before the deadline the
// extended handle promises (docs/adr/0011-honest-lock-lifetimes.md).
TEST_P(LockStoreConformance, ExtendAnswersNoMoreThanTheBackendKeeps) {
  const auto key = fresh_key();
  const auto bob = open("bob");
  const auto handle = acquire(key, open("alice"), kMinTtl);
  const auto sent_at = SteadyClock::now();
  const auto extended = store_->extend(handle.ref(), seconds(4));
  EXPECT_LE(extended.client_deadline, SteadyClock::now() + seconds(4));
  EXPECT_GE(extended.client_deadline, sent_at + kMinTtl)
      << "an extend keeps at least the grant's first TTL";
  std::optional<LockHandle> taken;
  SteadyClock::time_point taken_by{};
  ASSERT_TRUE(testing::wait_for(
      [&] {
        taken = store_->try_grant(key, bob.owner_id, bob.session_id,
                                  GrantRequest::exclusive(seconds(30)));
        taken_by = SteadyClock::now();  // the grant happened before this instant
        return taken.has_value();
      },
      seconds(15)))
      << "the extended lock never ended";
  const auto early =
      std::chrono::duration_cast<std::chrono::microseconds>(extended.client_deadline - taken_by);
  EXPECT_LE(early.count(), 0) << "another session was granted the key " << early.count() / 1000
                              << " ms before the extended handle's deadline";
  EXPECT_GT(taken->fencing_token, handle.fencing_token);
}

TEST_P(LockStoreConformance, ExtendByStaleGrantIsLockLost) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto stale = acquire(key, alice, kMinTtl);
  wait_until_expired(key);
  EXPECT_THROW(store_->extend(stale.ref(), seconds(30)), LockLostError)
      << "extended an expired grant";
  const auto current = acquire(key, bob);
  EXPECT_THROW(store_->extend(stale.ref(), seconds(30)), LockLostError);
  EXPECT_EQ(store_->read(key)->fencing_token, current.fencing_token);
  // A re-entrant re-acquire supersedes the earlier grant of the same session, too.
  const auto newer = acquire(key, bob);
  EXPECT_THROW(store_->extend(current.ref(), seconds(30)), LockLostError);
  EXPECT_NO_THROW(store_->extend(newer.ref(), seconds(30)));
}

TEST_P(LockStoreConformance, ReleaseOnlyByCurrentGrant) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto handle = acquire(key, alice);
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle.fencing_token + 1}));
  EXPECT_FALSE(store_->delete_if_owner(GrantRef{key, "bob", bob.session_id, handle.fencing_token}));
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{key, "alice", bob.session_id, handle.fencing_token}));
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{key, "bob", alice.session_id, handle.fencing_token}));
  ASSERT_TRUE(store_->read(key).has_value()) << "a wrong release touched the holder";
  EXPECT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle.fencing_token}));
  EXPECT_FALSE(store_->read(key).has_value());
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle.fencing_token}));
}

TEST_P(LockStoreConformance, LateReleaseByExpiredHolderLeavesNewHolderAlone) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto stale = acquire(key, alice, kMinTtl);
  wait_until_expired(key);
  const auto current = acquire(key, bob);
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, stale.fencing_token}));
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, current.fencing_token);
}

// --- Hand-over, revoke, reap --------------------------------------------------------------------

TEST_P(LockStoreConformance, HandoverMintsGreaterTokenForNextSession) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto from = acquire(key, alice);
  const auto next = store_->handover(from.ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, from.fencing_token);
  EXPECT_EQ(next->session_id, bob.session_id);
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, next->fencing_token);
  EXPECT_EQ(info->owner_id, "bob");
  EXPECT_THROW(store_->extend(from.ref(), seconds(30)), LockLostError);
}

TEST_P(LockStoreConformance, HandoverByStaleGrantIsLockLostAndChangesNothing) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto stale = acquire(key, alice, kMinTtl);
  wait_until_expired(key);
  const auto current = acquire(key, bob);
  EXPECT_THROW(store_->handover(stale.ref(), "carol", carol.session_id, seconds(30)),
               LockLostError);
  EXPECT_EQ(store_->read(key)->fencing_token, current.fencing_token);
}

TEST_P(LockStoreConformance, HandoverToClosedSessionReleasesTheLock) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto from = acquire(key, alice);
  store_->close_session(bob.session_id);
  EXPECT_FALSE(store_->handover(from.ref(), "bob", bob.session_id, seconds(30)).has_value());
  EXPECT_FALSE(store_->read(key).has_value());
}

TEST_P(LockStoreConformance, RevokeRemovesLiveGrantAndReportsIt) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto handle = acquire(key, alice);
  const auto outcome = store_->revoke(key);
  EXPECT_TRUE(outcome.revoked);
  EXPECT_EQ(outcome.fencing_token, handle.fencing_token);
  EXPECT_EQ(outcome.owner_id, "alice");
  EXPECT_FALSE(store_->read(key).has_value());
  EXPECT_THROW(store_->extend(handle.ref(), seconds(30)), LockLostError);
  const auto nothing = store_->revoke(key);
  EXPECT_FALSE(nothing.revoked);
  EXPECT_FALSE(nothing.fencing_token.has_value());
  // After a revoke the next grant still gets a greater token.
  EXPECT_GT(acquire(key, alice).fencing_token, handle.fencing_token);
}

TEST_P(LockStoreConformance, ReapExpiredLeavesNoLiveGrantBehind) {
  const auto key = fresh_key();
  const auto alive = fresh_key("alive");
  const auto alice = open("alice");
  acquire(key, alice, kMinTtl);
  const auto keep = acquire(alive, alice, seconds(60));
  wait_until_expired(key);
  store_->reap_expired();
  EXPECT_FALSE(store_->read(key).has_value());
  const auto info = store_->read(alive);
  ASSERT_TRUE(info.has_value()) << "reap removed a live grant";
  EXPECT_EQ(info->fencing_token, keep.fencing_token);
}

// --- Sessions -----------------------------------------------------------------------------------

TEST_P(LockStoreConformance, SessionCloseReleasesItsLocks) {
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto key1 = fresh_key("1");
  const auto key2 = fresh_key("2");
  const auto first = acquire(key1, alice);
  acquire(key2, alice);
  const auto released = store_->close_session(alice.session_id);
  EXPECT_EQ(released.size(), 2u);
  EXPECT_FALSE(store_->read(key1).has_value());
  EXPECT_FALSE(store_->read(key2).has_value());
  EXPECT_FALSE(store_->get_session(alice.session_id).has_value());
  EXPECT_GT(acquire(key1, bob).fencing_token, first.fencing_token);
  EXPECT_THROW(store_->close_session(alice.session_id), SessionNotFoundError);
}

TEST_P(LockStoreConformance, SessionExpiryReleasesItsLocks) {
  const auto alice = open("alice", kMinTtl);
  const auto bob = open("bob");
  const auto key = fresh_key();
  const auto dead = acquire(key, alice, seconds(60));
  ASSERT_TRUE(
      testing::wait_for([&] { return !store_->get_session(alice.session_id); }, seconds(10)));
  // The server runs reap_expired periodically; backends whose leases expire by themselves
  // (etcd) have released the lock already.
  store_->reap_expired();
  const auto taken =
      store_->try_grant(key, bob.owner_id, bob.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(taken.has_value()) << "the expired session's lock was not released";
  EXPECT_GT(taken->fencing_token, dead.fencing_token);
}

TEST_P(LockStoreConformance, HeartbeatKeepsSessionAliveAndExpiredSessionIsNotRevived) {
  const auto alice = open("alice", milliseconds(1500));
  const auto renewed = store_->heartbeat(alice.session_id);
  EXPECT_EQ(renewed.session_id, alice.session_id);
  EXPECT_EQ(renewed.owner_id, "alice");
  EXPECT_GE(renewed.expires_at, alice.expires_at);
  ASSERT_TRUE(store_->get_session(alice.session_id).has_value());
  ASSERT_TRUE(
      testing::wait_for([&] { return !store_->get_session(alice.session_id); }, seconds(10)));
  EXPECT_THROW(store_->heartbeat(alice.session_id), SessionNotFoundError);
  EXPECT_THROW(store_->try_grant(fresh_key(), "alice", alice.session_id,
                                 GrantRequest::exclusive(seconds(30))),
               SessionNotFoundError)
      << "an expired session must never be granted";
}

TEST_P(LockStoreConformance, AcquireWithUnknownSessionIsSessionNotFound) {
  EXPECT_THROW(store_->try_grant(fresh_key(), "alice", "no-such-session-0000",
                                 GrantRequest::exclusive(seconds(30))),
               SessionNotFoundError);
  EXPECT_THROW(store_->heartbeat("no-such-session-0000"), SessionNotFoundError);
  EXPECT_FALSE(store_->get_session("no-such-session-0000").has_value());
}

// --- Input and failures -------------------------------------------------------------------------

TEST_P(LockStoreConformance, InvalidTtlIsRejectedNamingTheField) {
  const auto alice = open("alice");
  for (const auto ttl :
       {milliseconds(0), milliseconds(-5), milliseconds(999), limits_.max_ttl + milliseconds(1)}) {
    try {
      store_->try_grant(fresh_key(), "alice", alice.session_id, GrantRequest::exclusive(ttl));
      ADD_FAILURE() << "ttl " << ttl.count() << "ms was accepted";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "ttl_ms");
    }
  }
  EXPECT_THROW(store_->open_session("alice", milliseconds(10)), InvalidArgumentError);
  EXPECT_THROW(store_->open_session("", seconds(10)), InvalidArgumentError);
  EXPECT_THROW(
      store_->try_grant("", "alice", alice.session_id, GrantRequest::exclusive(seconds(10))),
      InvalidArgumentError);
}

TEST_P(LockStoreConformance, BackendOutageIsUnavailableNeverHeld) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto handle = acquire(key, alice);
  harness_->begin_outage();
  // Both a free and a held key: the answer is an error, never "held" (std::nullopt).
  for (const auto& target : {key, fresh_key("free")}) {
    try {
      const auto result =
          store_->try_grant(target, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
      ADD_FAILURE() << "try_grant during an outage returned " << (result ? "a grant" : "\"held\"")
                    << " for " << target;
    } catch (const UnavailableError&) {
    }
  }
  EXPECT_THROW(store_->extend(handle.ref(), seconds(30)), UnavailableError);
  harness_->end_outage();
  // The store recovers by itself once the backend is back.
  ASSERT_TRUE(testing::wait_for(
      [&] {
        try {
          return store_->read(key).has_value();
        } catch (const UnavailableError&) {
          return false;
        }
      },
      seconds(30), milliseconds(50)));
  EXPECT_EQ(store_->read(key)->fencing_token, handle.fencing_token);
}

TEST_P(LockStoreConformance, TokensKeepGrowingAcrossStoreRestart) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto before = acquire(key, alice);
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, before.fencing_token}));
  store_.reset();
  store_ = harness_->make_backend(limits_);
  const auto bob = open("bob");
  EXPECT_GT(acquire(key, bob).fencing_token, before.fencing_token);
}

TEST_P(LockStoreConformance, ReadAndListReportLiveGrantsOnly) {
  const auto alice = open("alice");
  const auto prefix = fresh_key("list") + "/";
  acquire(prefix + "b", alice);
  acquire(prefix + "a", alice);
  acquire(prefix + "c", alice, kMinTtl);
  const auto gone = acquire(prefix + "d", alice);
  ASSERT_TRUE(store_->delete_if_owner(
      GrantRef{prefix + "d", "alice", alice.session_id, gone.fencing_token}));
  wait_until_expired(prefix + "c");
  const auto locks = store_->list(prefix, {}, 10);
  ASSERT_EQ(locks.size(), 2u);
  EXPECT_EQ(locks[0].key, prefix + "a");
  EXPECT_EQ(locks[1].key, prefix + "b");
  EXPECT_EQ(store_->list(prefix, {}, 1).size(), 1u);
  EXPECT_FALSE(store_->read(prefix + "d").has_value());
}

// Paging (C2 "Paging", GET /v1/locks): walking list() with each page's last grant as the next
// `after` gives every grant once, in (key as bytes, token) order, whatever the page size -- also
// through a key with several holders cut by a page boundary; list_delays pages by key.
TEST_P(LockStoreConformance, ListPagesByKeyAndTokenWithoutRepeatsOrGaps) {
  const auto prefix = fresh_key("pages") + "/";
  const auto alice = open("alice"), bob = open("bob"), carol = open("carol");
  // "B" sorts before "a" as bytes (not in most locales); "b" is a prefix of "b0"; "é" is UTF-8.
  for (const auto* name : {"a", "B", "b0", "\xc3\xa9"}) acquire(prefix + name, alice);
  for (const auto* session : {&alice, &bob, &carol}) {
    ASSERT_TRUE(store_->try_grant(prefix + "b", session->owner_id, session->session_id,
                                  GrantRequest::shared(seconds(30))));
  }
  for (const auto* session : {&alice, &bob}) {
    ASSERT_TRUE(store_->try_grant(prefix + "c", session->owner_id, session->session_id,
                                  GrantRequest::permit(2, seconds(30))));
  }
  ASSERT_TRUE(store_->try_grant(prefix + "d", "carol", carol.session_id,
                                GrantRequest::leader("leader", LockLease::session())));
  const auto everything = store_->list(prefix, {}, 100);
  ASSERT_EQ(everything.size(), 10u);
  const auto order = [](const LockInfo& a, const LockInfo& b) {
    return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
  };
  EXPECT_TRUE(std::is_sorted(everything.begin(), everything.end(), order))
      << "not in (key as bytes, token) order";
  EXPECT_EQ(everything.front().key, prefix + "B");
  EXPECT_EQ(everything.back().key, prefix + "\xc3\xa9");
  for (const std::size_t page_size : {1u, 2u, 3u, 4u}) {
    std::vector<LockInfo> walked;
    ListAfter after;
    for (int page = 0; page < 20; ++page) {
      const auto listed = store_->list(prefix, after, page_size);
      ASSERT_LE(listed.size(), page_size);
      walked.insert(walked.end(), listed.begin(), listed.end());
      if (listed.size() < page_size) break;
      after = ListAfter{listed.back().key, listed.back().fencing_token};
    }
    ASSERT_EQ(walked.size(), everything.size())
        << "pages of " << page_size << " repeated or skipped a grant";
    for (std::size_t i = 0; i < walked.size(); ++i) {
      EXPECT_EQ(walked[i].key, everything[i].key) << "pages of " << page_size << ", entry " << i;
      EXPECT_EQ(walked[i].fencing_token, everything[i].fencing_token) << "entry " << i;
    }
  }

  const auto delaying = store_->open_session("dave", seconds(60), seconds(30));
  for (const auto* name : {"x1", "x2", "x3"}) {
    acquire(prefix + name, delaying);
    ASSERT_TRUE(store_->revoke(prefix + name).revoked);  // a revoke is no release: a delay
  }
  std::vector<std::string> delayed;
  std::string after_key;
  for (int page = 0; page < 5; ++page) {
    const auto listed = store_->list_delays(prefix, after_key, 2);
    for (const auto& delay : listed) delayed.push_back(delay.key);
    if (listed.size() < 2) break;
    after_key = listed.back().key;
  }
  EXPECT_EQ(delayed, (std::vector<std::string>{prefix + "x1", prefix + "x2", prefix + "x3"}));
}

TEST_P(LockStoreConformance, RawDeleteFreesTheKeyAndTheNextTokenIsGreater) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  FencingToken last = 0;
  for (int cycle = 0; cycle < 5; ++cycle) {
    const auto handle = acquire(key, alice);
    EXPECT_GT(handle.fencing_token, last);
    last = handle.fencing_token;
    harness_->raw_delete(key);
  }
}

// --- Release notifications ----------------------------------------------------------------------

TEST_P(LockStoreConformance, WatchReleasesReportsReleaseAndRevoke) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  const auto handle = acquire(key, alice);
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle.fencing_token}));
  ASSERT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
      << "release not reported";
  const int after_release = calls.load();
  acquire(key, alice);
  store_->revoke(key);
  ASSERT_TRUE(testing::wait_for([&] { return calls.load() > after_release; }, seconds(10)))
      << "revoke not reported";
  subscription.reset();
  const int after_cancel = calls.load();
  const auto again = acquire(key, alice);
  store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, again.fencing_token});
  // Cancellation is synchronous: nothing may arrive after the subscription is gone. Give a
  // late notification the chance to show up by doing one more full round trip.
  store_->read(key);
  EXPECT_EQ(calls.load(), after_cancel);
}

TEST_P(LockStoreConformance, WatchReleasesSeesReleaseThroughAnotherStore) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "the embedded store serves one dlockd; it has no other store to hear from";
  }
  const auto key = fresh_key();
  auto other = harness_->make_backend(limits_);
  const auto alice = other->open_session("alice", seconds(60));
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  const auto handle =
      other->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  ASSERT_TRUE(
      other->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle->fencing_token}));
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
      << "a release through another store on the same storage was not reported";
}

// A hand-over changes the holder without a release: reported with the new grant's token, also
// to a store on the same storage (ADR-0036: a dlockd keeping the key's holder hears of it).
TEST_P(LockStoreConformance, WatchReleasesReportsAHandOverWithItsToken) {
  const auto key = fresh_key();
  const bool shared_storage = GetParam() != "sqlite";
  auto other = shared_storage ? harness_->make_backend(limits_) : nullptr;
  Backend& writer = shared_storage ? *other : *store_;
  const auto alice = writer.open_session("alice", seconds(60));
  const auto bob = writer.open_session("bob", seconds(60));
  const auto handle =
      writer.try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  // A failed acquire through the watching store first: its watch starts at a known revision
  // (etcd), so it is in place before the hand-over.
  const auto carol = open("carol");
  ASSERT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30))));
  std::mutex mutex;
  std::vector<FencingToken> reported;
  auto subscription = store_->watch_releases(key, [&](FencingToken granted) {
    std::lock_guard lock(mutex);
    reported.push_back(granted);
  });
  const auto next = writer.handover(handle->ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(next.has_value());
  const auto seen = [&] {
    std::lock_guard lock(mutex);
    return std::find(reported.begin(), reported.end(), next->fencing_token) != reported.end();
  };
  EXPECT_TRUE(testing::wait_for(seen, seconds(10)))
      << "the hand-over to token " << next->fencing_token << " was not reported with it";
}

// C2: a session ID is at least 128 bits from a CSPRNG, never a backend's sequential ID, so one
// cannot be guessed from another. 50 IDs: each at least 32 hex digits, all distinct, and not a
// run of nearby numbers (random 64-bit tails lie ~2^58 apart; sequential IDs lie within 2^32).
TEST_P(LockStoreConformance, SessionIdsAreRandomHexAndNotSequential) {
  std::set<std::string> ids;
  std::vector<std::uint64_t> tails;
  for (int i = 0; i < 50; ++i) {
    const auto session = store_->open_session("alice", seconds(60));
    const std::string& id = session.session_id;
    ASSERT_GE(id.size(), 32u) << id;
    ASSERT_EQ(id.find_first_not_of("0123456789abcdefABCDEF"), std::string::npos) << id;
    ids.insert(id);
    tails.push_back(std::stoull(id.substr(id.size() - 16), nullptr, 16));
  }
  EXPECT_EQ(ids.size(), 50u);
  std::sort(tails.begin(), tails.end());
  int nearby = 0;
  for (std::size_t i = 1; i < tails.size(); ++i) {
    if (tails[i] - tails[i - 1] < (std::uint64_t{1} << 32)) ++nearby;
  }
  EXPECT_LE(nearby, 1) << "session IDs look like consecutive numbers";
}

// Visibility (C3 "Sessions"): the live sessions of an owner prefix, by ID, in pages that
// neither repeat nor skip one; an expired or closed session is not listed.
TEST_P(LockStoreConformance, SessionsAreListedByOwnerInPagesOfIds) {
  const auto prefix = fresh_key("owner") + " ";
  std::set<std::string> opened;
  for (int i = 0; i < 5; ++i) {
    opened.insert(store_->open_session(prefix + std::to_string(i), seconds(60)).session_id);
  }
  const auto closed = store_->open_session(prefix + "closed", seconds(60));
  store_->close_session(closed.session_id);
  const auto short_lived = store_->open_session(prefix + "expired", kMinTtl);
  store_->open_session(fresh_key("another owner"), seconds(60));
  ASSERT_TRUE(testing::wait_for(
      [&] { return !store_->get_session(short_lived.session_id).has_value(); }, seconds(15)));

  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    const auto listed = store_->list_sessions(prefix, after, 2);
    ASSERT_LE(listed.size(), 2u);
    for (const auto& session : listed) {
      EXPECT_TRUE(session.owner_id.starts_with(prefix)) << session.owner_id;
      EXPECT_EQ(session.ttl, seconds(60));
      EXPECT_GT(session.expires_at, WallClock::now());
      seen.push_back(session.session_id);
    }
    if (listed.size() < 2) break;
    after = listed.back().session_id;
  }
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), opened)
      << "a page repeated or skipped a session, or listed a closed or expired one";
  EXPECT_EQ(seen.size(), opened.size());
}

// A session's grants, every mode, by key: what GET /v1/sessions/{id} shows it holds.
TEST_P(LockStoreConformance, SessionGrantsAreItsLiveGrantsOfEveryMode) {
  const auto exclusive = fresh_key("a"), shared = fresh_key("b"), permit = fresh_key("c"),
             bound = fresh_key("d"), others = fresh_key("e"), released = fresh_key("f");
  const auto alice = open("alice"), bob = open("bob");
  ASSERT_TRUE(store_->try_grant(exclusive, "alice", alice.session_id,
                                GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(
      store_->try_grant(shared, "alice", alice.session_id, GrantRequest::shared(seconds(30))));
  ASSERT_TRUE(
      store_->try_grant(permit, "alice", alice.session_id, GrantRequest::permit(3, seconds(30))));
  ASSERT_TRUE(store_->try_grant(bound, "alice", alice.session_id,
                                GrantRequest::exclusive(LockLease::session())));
  ASSERT_TRUE(
      store_->try_grant(others, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))));
  const auto gone = acquire(released, alice);
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{released, "alice", alice.session_id, gone.fencing_token}));

  const auto grants = store_->session_grants(alice.session_id);
  std::vector<std::string> keys;
  for (const auto& grant : grants) {
    EXPECT_EQ(grant.session_id, alice.session_id);
    keys.push_back(grant.key);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{exclusive, shared, permit, bound}));
  ASSERT_EQ(grants.size(), 4u);
  EXPECT_EQ(grants[1].mode, HoldMode::kShared);
  EXPECT_EQ(grants[2].mode, HoldMode::kPermit);
  EXPECT_TRUE(grants[3].session_bound);
  EXPECT_TRUE(store_->session_grants(std::string(32, 'f')).empty());
}

TEST_P(LockStoreConformance, BackendIdNamesTheBackend) {
  EXPECT_EQ(store_->backend_id(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Backends, LockStoreConformance,
                         ::testing::ValuesIn(testing::conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
