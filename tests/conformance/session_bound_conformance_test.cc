// The conformance matrix for session-bound grants (LockLease::session(), ADR-0018): a grant that
// lives exactly as long as its session. The same fixture and backends as
// lock_store_conformance_test.cc, which instantiates the suite; each case here is the
// session-bound twin of a TTL case there.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "conformance/conformance_fixture.h"
#include "dlock/lock_store.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using conformance_test::kMinTtl;
using conformance_test::LockStoreConformance;
using std::chrono::milliseconds;
using std::chrono::seconds;

const LockLease kSessionBound = LockLease::session();

// How far a session-bound grant's reported expiry may sit from its session's: the two are read
// at different instants (and etcd reports whole seconds).
constexpr auto kExpirySlack = seconds(3);

bool near(WallClock::time_point a, WallClock::time_point b) {
  return (a > b ? a - b : b - a) <= kExpirySlack;
}

TEST_P(LockStoreConformance, SessionBoundGrantReportsItsModeAndTheSessionsExpiry) {
  const auto key = fresh_key();
  const auto ttl_key = fresh_key("ttl");
  const auto session = open("alice", seconds(60));
  const auto sent_at = SteadyClock::now();
  const auto handle =
      store_->try_grant(key, "alice", session.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(handle.has_value());
  EXPECT_TRUE(handle->session_bound);
  EXPECT_GT(handle->fencing_token, 0u);
  EXPECT_TRUE(near(handle->server_expiry, session.expires_at));
  EXPECT_LE(handle->client_deadline, sent_at + seconds(61));
  EXPECT_GT(handle->client_deadline, sent_at + seconds(50));
  EXPECT_FALSE(acquire(ttl_key, session).session_bound);

  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->session_bound);
  EXPECT_EQ(info->fencing_token, handle->fencing_token);
  EXPECT_TRUE(near(info->expires_at, session.expires_at));
  ASSERT_TRUE(store_->read(ttl_key).has_value());
  EXPECT_FALSE(store_->read(ttl_key)->session_bound);

  const auto listed = store_->list(key, {}, 10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].session_bound);
  EXPECT_TRUE(near(listed[0].expires_at, session.expires_at));

  // A reap leaves a session-bound grant of a live session alone.
  store_->reap_expired();
  EXPECT_TRUE(store_->read(key).has_value());
}

TEST_P(LockStoreConformance, SessionBoundGrantLivesByHeartbeatsAndDiesWithItsSession) {
  const auto key = fresh_key();
  const auto alice = open("alice", kMinTtl);
  const auto bob = open("bob");
  const auto held =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(held.has_value());
  // Heartbeats keep it well past the session TTL; it has no TTL of its own to run out.
  const auto until = SteadyClock::now() + milliseconds(2500);
  while (SteadyClock::now() < until) {
    store_->heartbeat(alice.session_id);
    EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                     .has_value());
    ASSERT_TRUE(store_->read(key).has_value());
    std::this_thread::sleep_for(milliseconds(250));  // the heartbeat period under test
  }
  // No more heartbeats: the grant ends with the session, without a reaper.
  wait_until_expired(key);
  const auto taken =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(taken.has_value());
  EXPECT_GT(taken->fencing_token, held->fencing_token);
}

TEST_P(LockStoreConformance, SessionBoundReleaseLeavesTheSessionAliveAndReacquireIsGreater) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto first =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(first.has_value());
  const auto again =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(again->fencing_token, first->fencing_token);
  EXPECT_FALSE(store_->delete_if_owner(
      GrantRef{key, "alice", alice.session_id, first->fencing_token}));  // stale
  EXPECT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, again->fencing_token}));
  EXPECT_FALSE(store_->read(key).has_value());
  // The release ended the grant, not its session.
  ASSERT_TRUE(store_->get_session(alice.session_id).has_value());
  store_->heartbeat(alice.session_id);
  const auto third =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(third.has_value());
  EXPECT_GT(third->fencing_token, again->fencing_token);
  // A re-entrant acquire takes the lease asked for this time.
  const auto as_ttl = acquire(key, alice, seconds(30));
  EXPECT_FALSE(as_ttl.session_bound);
  EXPECT_GT(as_ttl.fencing_token, third->fencing_token);
  ASSERT_TRUE(store_->read(key).has_value());
  EXPECT_FALSE(store_->read(key)->session_bound);
}

TEST_P(LockStoreConformance, SessionBoundExtendIsACheckedNoOpAnsweringTheSessionsExpiry) {
  const auto key = fresh_key();
  const auto alice = open("alice", seconds(60));
  const auto handle =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(handle.has_value());
  // The TTL asked for is ignored: the answer is the session's expiry, not 5 s from now.
  const auto extended = store_->extend(handle->ref(), seconds(5));
  EXPECT_EQ(extended.fencing_token, handle->fencing_token);
  EXPECT_TRUE(extended.session_bound);
  EXPECT_TRUE(near(extended.server_expiry, alice.expires_at));
  EXPECT_GT(extended.client_deadline, SteadyClock::now() + seconds(50));
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, handle->fencing_token);
  // A reference made from the token (as the server makes it) gets the same.
  const GrantRef by_token{key, "alice", alice.session_id, handle->fencing_token};
  const auto checked = store_->extend(by_token, seconds(5));
  EXPECT_EQ(checked.fencing_token, handle->fencing_token);
  EXPECT_TRUE(checked.session_bound);
  EXPECT_TRUE(near(checked.server_expiry, alice.expires_at));
  EXPECT_GT(checked.client_deadline, SteadyClock::now() + seconds(50));
  ASSERT_TRUE(store_->delete_if_owner(by_token));
  EXPECT_THROW(store_->extend(handle->ref(), seconds(30)), LockLostError);
  EXPECT_THROW(store_->extend(by_token, seconds(30)), LockLostError);
}

TEST_P(LockStoreConformance, SessionBoundExtendAfterTheSessionDiedIsLockLost) {
  const auto key = fresh_key();
  const auto alice = open("alice", kMinTtl);
  const auto handle =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(handle.has_value());
  wait_until_expired(key);
  EXPECT_THROW(store_->extend(handle->ref(), seconds(30)), LockLostError);
}

TEST_P(LockStoreConformance, HandoverToASessionBoundWaiterAndOnToATtlOne) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto from = acquire(key, alice, seconds(30));
  const auto to_bob = store_->handover(from.ref(), "bob", bob.session_id, kSessionBound);
  ASSERT_TRUE(to_bob.has_value());
  EXPECT_TRUE(to_bob->session_bound);
  EXPECT_GT(to_bob->fencing_token, from.fencing_token);
  ASSERT_TRUE(store_->read(key).has_value());
  EXPECT_TRUE(store_->read(key)->session_bound);
  EXPECT_EQ(store_->read(key)->session_id, bob.session_id);
  const auto to_carol = store_->handover(to_bob->ref(), "carol", carol.session_id, seconds(30));
  ASSERT_TRUE(to_carol.has_value());
  EXPECT_FALSE(to_carol->session_bound);
  EXPECT_GT(to_carol->fencing_token, to_bob->fencing_token);
  EXPECT_THROW(store_->handover(to_bob->ref(), "alice", alice.session_id, kSessionBound),
               LockLostError);
  // Handing a session-bound grant over ends the grant, not the session it was bound to.
  ASSERT_TRUE(store_->get_session(bob.session_id).has_value());
  const auto other = store_->try_grant(fresh_key("other"), "bob", bob.session_id,
                                       GrantRequest::exclusive(kSessionBound));
  EXPECT_TRUE(other.has_value());
}

TEST_P(LockStoreConformance, SessionBoundHandoverToAClosedSessionReleasesTheLock) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto from =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(from.has_value());
  store_->close_session(bob.session_id);
  EXPECT_FALSE(store_->handover(from->ref(), "bob", bob.session_id, kSessionBound).has_value());
  EXPECT_FALSE(store_->read(key).has_value());
  EXPECT_TRUE(store_->get_session(alice.session_id).has_value());
}

TEST_P(LockStoreConformance, SessionBoundRevokeEndsTheGrantNotTheSession) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto handle =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(handle.has_value());
  const auto outcome = store_->revoke(key);
  EXPECT_TRUE(outcome.revoked);
  EXPECT_EQ(outcome.fencing_token, handle->fencing_token);
  EXPECT_EQ(outcome.owner_id, "alice");
  EXPECT_FALSE(store_->read(key).has_value());
  EXPECT_THROW(store_->extend(handle->ref(), seconds(30)), LockLostError);
  ASSERT_TRUE(store_->get_session(alice.session_id).has_value());
  const auto next =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, handle->fencing_token);
}

TEST_P(LockStoreConformance, SessionCloseReleasesItsSessionBoundLocks) {
  const auto key = fresh_key();
  const auto ttl_key = fresh_key("ttl");
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto handle =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(handle.has_value());
  acquire(ttl_key, alice, seconds(30));
  const auto released = store_->close_session(alice.session_id);
  ASSERT_EQ(released.size(), 2u);
  const auto bound = std::find_if(released.begin(), released.end(),
                                  [&](const LockInfo& info) { return info.key == key; });
  ASSERT_NE(bound, released.end());
  EXPECT_TRUE(bound->session_bound);
  EXPECT_EQ(bound->fencing_token, handle->fencing_token);
  EXPECT_FALSE(store_->read(key).has_value());
  const auto taken =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(kSessionBound));
  ASSERT_TRUE(taken.has_value());
  EXPECT_GT(taken->fencing_token, handle->fencing_token);
}

TEST_P(LockStoreConformance, SessionBoundAcquireByADeadSessionIsSessionNotFound) {
  const auto alice = open("alice");
  store_->close_session(alice.session_id);
  EXPECT_THROW(store_->try_grant(fresh_key(), "alice", alice.session_id,
                                 GrantRequest::exclusive(kSessionBound)),
               SessionNotFoundError);
}

}  // namespace
}  // namespace dlock
