// The conformance matrix for lock-delay (docs/adr/0020-more-primitives-design.md, "Lock-delay";
// C2 "Lock-delay"): a session may carry a lock-delay; when one of its grants ends without a
// release (its TTL or its session expired, or it was revoked), no grant of that name is made to
// anyone until the delay after that end. A release, a hand-over and close_session have none.
// The same fixture and backends as lock_store_conformance_test.cc, which instantiates the suite.
//
// Every timing assertion has a lower bound (the name is not granted before the promised end plus
// the delay: the safety property) and a generous upper bound (it is granted eventually: etcd
// measures the delay in whole lease seconds and may start it when it finds the ended grant).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/conformance_fixture.h"
#include "dlock/lock_store.h"
#include "support/grant_asks.h"
#include "support/subprocess.h"

using dlock::testing::Ask;
using dlock::testing::permit_ask;

namespace dlock {
namespace {

using conformance_test::kMinTtl;
using conformance_test::LockStoreConformance;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kDelay{1500};
// Clock reading slack between this process and the backend on the same machine.
constexpr milliseconds kSlack{250};
// How long a delay may take to end at most (etcd: whole lease seconds, found late).
constexpr seconds kEventually{15};

// Tries `grant` until it succeeds (bounded by kEventually); returns when it did.
template <typename Grant>
std::optional<WallClock::time_point> granted_at(Grant grant) {
  std::optional<WallClock::time_point> at;
  testing::wait_for(
      [&] {
        if (!grant()) return false;
        at = WallClock::now();
        return true;
      },
      kEventually);
  return at;
}

TEST_P(LockStoreConformance, LockDelayIsReportedByTheSession) {
  const auto plain = store_->open_session("alice", seconds(60));
  EXPECT_EQ(plain.lock_delay, milliseconds(0));
  const auto delayed = store_->open_session("alice", seconds(60), kDelay);
  EXPECT_EQ(delayed.lock_delay, kDelay);
  const auto read = store_->get_session(delayed.session_id);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->lock_delay, kDelay);
  EXPECT_EQ(store_->heartbeat(delayed.session_id).lock_delay, kDelay);
}

TEST_P(LockStoreConformance, LockDelayOutOfBoundsIsRefusedNamingTheField) {
  for (const auto delay : {milliseconds(-1), limits_.max_lock_delay + milliseconds(1)}) {
    try {
      store_->open_session("alice", seconds(60), delay);
      ADD_FAILURE() << "a lock-delay of " << delay.count() << " ms was accepted";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "lock_delay_ms");
    }
  }
  EXPECT_EQ(store_->open_session("alice", seconds(60), limits_.max_lock_delay).lock_delay,
            limits_.max_lock_delay);
}

// THE property: a grant whose TTL passed keeps its name from everyone, its own session
// included, in every mode, for the delay -- and then the name is granted with a greater token.
TEST_P(LockStoreConformance, LockDelayExpiredGrantKeepsItsNameFromEveryoneForTheDelay) {
  const auto key = fresh_key();
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto bob = open("bob");
  const auto held =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kMinTtl));
  ASSERT_TRUE(held.has_value());
  wait_until_expired(key);

  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "granted during the lock-delay of an expired grant";
  EXPECT_FALSE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))))
      << "the expired grant's own session was granted during its lock-delay";
  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::shared(seconds(30))))
      << "a reader was granted during the lock-delay";
  EXPECT_FALSE(
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::leader("v", seconds(30))))
      << "a leader was granted during the lock-delay";
  EXPECT_FALSE(store_->read(key).has_value()) << "the delay is reported as a grant";

  std::optional<LockHandle> next;
  const auto at = granted_at([&] {
    next = store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
    return next.has_value();
  });
  ASSERT_TRUE(at.has_value()) << "the name was never granted again after the delay";
  EXPECT_GE(*at, held->server_expiry + kDelay - kSlack) << "granted before the lock-delay ended";
  EXPECT_GT(next->fencing_token, held->fencing_token);
}

// A session-bound grant ends with its session: the delay counts from the session's expiry.
TEST_P(LockStoreConformance, LockDelaySessionExpiryKeepsItsSessionBoundNameForTheDelay) {
  const auto key = fresh_key();
  const auto alice = store_->open_session("alice", kMinTtl, kDelay);
  const auto bob = open("bob");
  ASSERT_TRUE(store_->try_grant(key, "alice", alice.session_id,
                                GrantRequest::exclusive(LockLease::session())));
  wait_until_expired(key);
  EXPECT_FALSE(store_->get_session(alice.session_id).has_value());
  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "granted during the lock-delay of a grant whose session expired";
  const auto at = granted_at([&] {
    return store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
  });
  ASSERT_TRUE(at.has_value()) << "the name was never granted again after the delay";
  EXPECT_GE(*at, alice.expires_at + kDelay - kSlack) << "granted before the lock-delay ended";
}

// A revoke ends a live grant without a release: the delay counts from the revoke.
TEST_P(LockStoreConformance, LockDelayRevokeKeepsTheNameForTheDelay) {
  const auto key = fresh_key();
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto bob = open("bob");
  ASSERT_TRUE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  const auto revoked_at = WallClock::now();
  ASSERT_TRUE(store_->revoke(key).revoked);
  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "granted during the lock-delay of a revoked grant";
  EXPECT_FALSE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))))
      << "the revoked grant's own session was granted during its lock-delay";
  const auto at = granted_at([&] {
    return store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
  });
  ASSERT_TRUE(at.has_value()) << "the name was never granted again after the delay";
  EXPECT_GE(*at, revoked_at + kDelay - kSlack) << "granted before the lock-delay ended";
}

// A release, close_session and a hand-over end grants cleanly: the name is free at once.
TEST_P(LockStoreConformance, LockDelayCleanEndsHaveNone) {
  const auto released = fresh_key("released"), closed = fresh_key("closed"),
             handed = fresh_key("handed");
  const auto alice = store_->open_session("alice", seconds(60), seconds(30));
  const auto bob = open("bob"), carol = open("carol");

  const auto first = acquire(released, alice);
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{released, "alice", alice.session_id, first.fencing_token}));
  EXPECT_TRUE(
      store_->try_grant(released, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "a released name was delayed";

  const auto from = acquire(handed, alice);
  const auto to = store_->handover(from.ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(to.has_value());
  ASSERT_TRUE(store_->delete_if_owner(GrantRef{handed, "bob", bob.session_id, to->fencing_token}));
  EXPECT_TRUE(
      store_->try_grant(handed, "carol", carol.session_id, GrantRequest::exclusive(seconds(30))))
      << "a name handed over and released was delayed";

  acquire(closed, alice);
  store_->close_session(alice.session_id);
  EXPECT_TRUE(
      store_->try_grant(closed, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "a name released by close_session was delayed";
}

// A late release -- the holder woke after its lease ended and lets go -- is no clean end: the
// delay stays (the very holder lock-delay is for). An exclusive grant and a permit; and
// close_session of a session whose TTL grants had ended keeps their delays too.
TEST_P(LockStoreConformance, LockDelayLateReleaseOrCloseKeepsTheDelay) {
  const auto exclusive = fresh_key("exclusive"), permits = fresh_key("permits"),
             closed = fresh_key("closed");
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto bob = open("bob");
  const Ask two = permit_ask(2);
  const auto held =
      store_->try_grant(exclusive, "alice", alice.session_id, GrantRequest::exclusive(kMinTtl));
  const auto permit = store_->try_grant(permits, "alice", alice.session_id, two(kMinTtl));
  ASSERT_TRUE(
      store_->try_grant(closed, "alice", alice.session_id, GrantRequest::exclusive(kMinTtl)));
  ASSERT_TRUE(held.has_value());
  ASSERT_TRUE(permit.has_value());
  wait_until_expired(exclusive);
  wait_until_expired(permits);
  wait_until_expired(closed);

  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{exclusive, "alice", alice.session_id, held->fencing_token}));
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{permits, "alice", alice.session_id, permit->fencing_token}));
  store_->close_session(alice.session_id);
  EXPECT_FALSE(
      store_->try_grant(exclusive, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "a late release ended the lock-delay of an exclusive grant";
  EXPECT_FALSE(store_->try_grant(permits, "bob", bob.session_id, two(seconds(30))))
      << "a late release ended the lock-delay of a permit";
  EXPECT_FALSE(
      store_->try_grant(closed, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "close_session ended the lock-delay of a grant that had expired";
  EXPECT_TRUE(granted_at([&] {
    return store_->try_grant(permits, "bob", bob.session_id, two(seconds(30))).has_value();
  })) << "the permit was never granted again after the delay";
}

// A close that comes after the session expired (a holder waking from a pause and shutting down)
// is refused and ends no delay: its grants ended with the session, not by the close.
TEST_P(LockStoreConformance, LockDelayCloseOfAnExpiredSessionKeepsTheDelay) {
  const auto key = fresh_key();
  const auto alice = store_->open_session("alice", kMinTtl, kDelay);
  const auto bob = open("bob");
  ASSERT_TRUE(store_->try_grant(key, "alice", alice.session_id,
                                GrantRequest::exclusive(LockLease::session())));
  wait_until_expired(key);
  EXPECT_THROW(store_->close_session(alice.session_id), SessionNotFoundError);
  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "closing the expired session ended the lock-delay of its grant";
  EXPECT_TRUE(granted_at([&] {
    return store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
        .has_value();
  })) << "the name was never granted again after the delay";
}

// A grant handed over carries its new session's delay, not the old one's.
TEST_P(LockStoreConformance, LockDelayOfAHandedOverGrantIsItsNewSessions) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = store_->open_session("bob", seconds(60), kDelay);
  const auto carol = open("carol");
  const auto to = store_->handover(acquire(key, alice).ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(to.has_value());
  ASSERT_TRUE(store_->revoke(key).revoked);
  EXPECT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30))))
      << "the new holder's lock-delay was not kept";
}

// Holder sets: an expired reader delays the name for a writer and for new readers; a permit
// holder's expiry delays the permits that are left. Holders that live on keep what they hold.
TEST_P(LockStoreConformance, LockDelayOfAnExpiredHolderKeepsTheNameFromNewGrants) {
  const auto shared = fresh_key("shared"), permits = fresh_key("permits");
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto bob = open("bob"), carol = open("carol");
  const Ask two = permit_ask(2);
  ASSERT_TRUE(store_->try_grant(shared, "alice", alice.session_id, GrantRequest::shared(kMinTtl)));
  ASSERT_TRUE(store_->try_grant(permits, "alice", alice.session_id, two(kMinTtl)));
  const auto kept = store_->try_grant(permits, "bob", bob.session_id, two(seconds(30)));
  ASSERT_TRUE(kept.has_value());
  wait_until_expired(shared);
  ASSERT_TRUE(
      testing::wait_for([&] { return store_->read_holders(permits).size() == 1; }, seconds(10)));

  EXPECT_FALSE(
      store_->try_grant(shared, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "a writer was granted during an expired reader's lock-delay";
  EXPECT_FALSE(store_->try_grant(shared, "bob", bob.session_id, GrantRequest::shared(seconds(30))))
      << "a reader was granted during an expired reader's lock-delay";
  EXPECT_FALSE(store_->try_grant(permits, "carol", carol.session_id, two(seconds(30))))
      << "a permit was granted during an expired permit holder's lock-delay";
  EXPECT_EQ(store_->read_holders(permits).size(), 1u) << "a live permit holder was dropped";
  EXPECT_NO_THROW(store_->extend(kept->ref(), seconds(30))) << "a live holder lost its permit";

  EXPECT_TRUE(granted_at([&] {
    return store_->try_grant(shared, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
        .has_value();
  })) << "the shared name was never granted again after the delay";
  EXPECT_TRUE(granted_at([&] {
    return store_->try_grant(permits, "carol", carol.session_id, two(seconds(30))).has_value();
  })) << "the permit was never granted again after the delay";
}

// Waiters are told: watch_releases fires for the name once the delay is over (by the reaper at
// the latest), so a waiting acquire retries then.
TEST_P(LockStoreConformance, LockDelayEndIsAnnouncedToWatchers) {
  const auto key = fresh_key();
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto held =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kMinTtl));
  ASSERT_TRUE(held.has_value());
  std::mutex mutex;
  std::vector<WallClock::time_point> fired;
  auto subscription = store_->watch_releases(key, [&](FencingToken) {
    std::lock_guard lock(mutex);
    fired.push_back(WallClock::now());
  });
  const auto end = held->server_expiry + kDelay;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        store_->reap_expired();
        std::lock_guard lock(mutex);
        return !fired.empty() && fired.back() >= end - kSlack;
      },
      kEventually))
      << "the end of the lock-delay was never announced";
  const auto bob = open("bob");
  EXPECT_TRUE(testing::wait_for(
      [&] {
        return store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
            .has_value();
      },
      seconds(5)))
      << "announced, but not grantable";
}

// Visibility (C2 "Lock-delay", issue 36 item 8): a running delay is listed with its end, by
// prefix, ordered by key; a live grant, a clean release and a name without a delay are not.
TEST_P(LockStoreConformance, LockDelayIsListedWithItsEndUntilItEnds) {
  const auto base = fresh_key("listed");
  const auto revoked = base + "/a", expired = base + "/b", released = base + "/c",
             live = base + "/d";
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto granted_at_steady = SteadyClock::now();
  const auto revoked_grant =
      store_->try_grant(revoked, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(revoked_grant.has_value());
  // The backend's clock when it granted it (the sqlite store clock may lag the wall clock,
  // ADR-0013): the delay's end is reported by that clock, as expiries are.
  const auto backend_granted_at = revoked_grant->server_expiry - seconds(30);
  const auto short_grant =
      store_->try_grant(expired, "alice", alice.session_id, GrantRequest::exclusive(kMinTtl));
  ASSERT_TRUE(short_grant.has_value());
  const auto clean = acquire(released, alice);
  ASSERT_TRUE(
      store_->try_grant(live, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{released, "alice", alice.session_id, clean.fencing_token}));
  ASSERT_TRUE(store_->revoke(revoked).revoked);
  wait_until_expired(expired);

  const auto delays = store_->list_delays(base, "", 100);
  const auto elapsed = SteadyClock::now() - granted_at_steady;
  ASSERT_EQ(delays.size(), 2u) << "expected the revoked and the expired name only";
  EXPECT_EQ(delays[0].key, revoked);
  EXPECT_EQ(delays[1].key, expired);
  // The end: the revoke (or the expiry) plus the delay; etcd counts whole lease seconds, from
  // when a store found the end.
  EXPECT_GE(delays[0].until, backend_granted_at + kDelay - kSlack);
  EXPECT_LE(delays[0].until, backend_granted_at +
                                 std::chrono::duration_cast<WallClock::duration>(elapsed) + kDelay +
                                 seconds(2) + kSlack);
  EXPECT_GE(delays[1].until, short_grant->server_expiry + kDelay - kSlack);
  EXPECT_EQ(store_->list_delays(base, "", 1).size(), 1u) << "the limit was not kept";
  EXPECT_EQ(store_->list_delays(expired, "", 100).size(), 1u) << "the prefix was not kept";
  EXPECT_TRUE(store_->list_delays(fresh_key("elsewhere"), "", 100).empty());
  // Once a store has found the ends (its reaper; etcd starts a delay then), a delay that is over
  // is not listed, whether or not a reaper removed what is left of it.
  store_->reap_expired();
  EXPECT_TRUE(
      testing::wait_for([&] { return store_->list_delays(base, "", 100).empty(); }, kEventually))
      << "a delay that ended is still listed";
}

// An administrator ends a running delay: the name is granted at once, with a greater token, and
// waiters are told; a live grant and its own future delay are untouched.
TEST_P(LockStoreConformance, LockDelayClearedByAnAdministratorFreesTheNameAtOnce) {
  const auto key = fresh_key("cleared"), kept = fresh_key("kept"), shared = fresh_key("shared");
  const auto alice = store_->open_session("alice", seconds(60), seconds(60));
  const auto bob = open("bob");
  const auto held =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(held.has_value());
  ASSERT_TRUE(store_->revoke(key).revoked);
  ASSERT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))));
  std::atomic<int> fired{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++fired; });

  EXPECT_TRUE(store_->clear_delay(key)) << "a running delay was not reported cleared";
  EXPECT_TRUE(store_->list_delays(key, "", 10).empty()) << "a cleared delay is still listed";
  const auto next =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(next.has_value()) << "the name stayed delayed after the delay was cleared";
  EXPECT_GT(next->fencing_token, held->fencing_token);
  EXPECT_TRUE(testing::wait_for([&] { return fired.load() > 0; }, seconds(10)))
      << "watchers were not told that the delay was cleared";
  EXPECT_FALSE(store_->clear_delay(key)) << "a name without a delay was reported cleared";

  // A live grant keeps its name, and its own delay still follows its end.
  const auto live =
      store_->try_grant(kept, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(live.has_value());
  EXPECT_FALSE(store_->clear_delay(kept));
  EXPECT_NO_THROW(store_->extend(live->ref(), seconds(30)))
      << "clearing a delay ended a live grant";
  ASSERT_TRUE(store_->revoke(kept).revoked);
  EXPECT_FALSE(store_->try_grant(kept, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "clearing a delay before the grant ended cancelled the delay of its end";

  // A holder set: an expired reader's delay, cleared, lets a writer in.
  const auto carol = store_->open_session("carol", seconds(60), seconds(60));
  ASSERT_TRUE(store_->try_grant(shared, "carol", carol.session_id, GrantRequest::shared(kMinTtl)));
  wait_until_expired(shared);
  ASSERT_FALSE(
      store_->try_grant(shared, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))));
  EXPECT_TRUE(store_->clear_delay(shared));
  EXPECT_TRUE(store_->try_grant(shared, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                  .has_value())
      << "the writer stayed delayed after the reader's delay was cleared";

  // Permits: the expired holder's delay goes; the live holder keeps its permit and its delay.
  const auto permits = fresh_key("permits");
  const Ask two = permit_ask(2);
  const auto dave = store_->open_session("dave", seconds(60), seconds(60));
  ASSERT_TRUE(store_->try_grant(permits, "carol", carol.session_id, two(kMinTtl)));
  const auto lives = store_->try_grant(permits, "dave", dave.session_id, two(seconds(30)));
  ASSERT_TRUE(lives.has_value());
  ASSERT_TRUE(
      testing::wait_for([&] { return store_->read_holders(permits).size() == 1; }, seconds(10)));
  ASSERT_FALSE(store_->try_grant(permits, "bob", bob.session_id, two(seconds(30))));
  EXPECT_TRUE(store_->clear_delay(permits));
  EXPECT_NO_THROW(store_->extend(lives->ref(), seconds(30)))
      << "clearing a delay ended a live permit";
  EXPECT_TRUE(store_->try_grant(permits, "bob", bob.session_id, two(seconds(30))))
      << "the permit stayed delayed after the expired holder's delay was cleared";
  ASSERT_TRUE(store_->revoke(permits).revoked);
  EXPECT_FALSE(store_->try_grant(permits, "bob", bob.session_id, two(seconds(30))))
      << "clearing a delay cancelled the delay of a permit holder that was still live";
}

// The delay lives in the storage, not in one server's memory: another store on the same
// storage keeps it too.
TEST_P(LockStoreConformance, LockDelayIsKeptByAnotherStoreOnTheSameStorage) {
  if (GetParam() == "sqlite" || GetParam() == "fake") {
    GTEST_SKIP() << "one store per storage here; its restart is covered by the restore tests";
  }
  const auto key = fresh_key();
  auto other = harness_->make_backend(limits_);
  const auto alice = store_->open_session("alice", seconds(60), kDelay);
  const auto bob = other->open_session("bob", seconds(60));
  ASSERT_TRUE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(store_->revoke(key).revoked);
  EXPECT_FALSE(other->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))))
      << "another store granted during the lock-delay";
  EXPECT_TRUE(granted_at([&] {
    return other->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
        .has_value();
  }));
}

}  // namespace
}  // namespace dlock
