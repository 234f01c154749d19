// Elections on etcd (docs/adr/0020-more-primitives-design.md, "Leader election"; C2 "Elections
// (etcd)") against a real single-member etcd: what the conformance matrix cannot see from the SPI
// alone. A proclaim's Put keeps the key's lease and create revision but moves its mod revision,
// so every path that checks a grant by its token must still find a proclaimed leader (hand-over,
// revoke, the session-bound extend and hand-over, close_session); and the lock key's watch,
// which now receives puts, wakes nobody for a plain grant's.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#include "support/etcd_store_fixture.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class EtcdElectionsTest : public testing::EtcdStoreFixture {
 protected:
  EtcdElectionsTest() : EtcdStoreFixture("etcd-elections") {}
};

// The Put of a proclaim keeps the key's lease (ignore_lease) and create revision, moves its mod
// revision, and the token stays the grant's.
TEST_F(EtcdElectionsTest, ProclaimKeepsTheLeaseAndTheTokenAndMovesTheRevision) {
  const auto key = fresh_key("lease");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto leader =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::leader("a", seconds(30)));
  ASSERT_TRUE(leader.has_value());
  const auto before = etcd_->raw().get(store::etcd::format_lock_key(key));
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->mod_revision, static_cast<std::int64_t>(leader->fencing_token));
  const auto proclaimed = store_->proclaim(leader->ref(), "b");
  const auto after = etcd_->raw().get(store::etcd::format_lock_key(key));
  ASSERT_TRUE(after.has_value());
  EXPECT_NE(after->lease, 0) << "the proclaim detached the key from its lease";
  EXPECT_EQ(after->lease, before->lease);
  EXPECT_EQ(after->create_revision, before->create_revision);
  EXPECT_GT(after->mod_revision, before->mod_revision);
  EXPECT_EQ(proclaimed.fencing_token, leader->fencing_token);
  EXPECT_EQ(store_->read(key)->fencing_token, leader->fencing_token);
}

// A proclaimed TTL leader: handed over (the next grant has a greater token and no value), and,
// as a second leader, revoked (the outcome names its token).
TEST_F(EtcdElectionsTest, ProclaimedLeaderIsHandedOverAndRevokedByItsToken) {
  const auto key = fresh_key("handover");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto bob = store_->open_session("bob", seconds(30));
  const auto leader =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::leader("a", seconds(30)));
  ASSERT_TRUE(leader.has_value());
  store_->proclaim(leader->ref(), "b");
  store_->proclaim(leader->ref(), "c");
  const auto next = store_->handover(leader->ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
  EXPECT_FALSE(store_->read(key)->value.has_value());
  EXPECT_THROW(store_->proclaim(leader->ref(), "stale"), LockLostError);

  ASSERT_TRUE(store_->delete_if_owner(GrantRef{key, "bob", bob.session_id, next->fencing_token}));
  const auto second =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::leader("x", seconds(30)));
  ASSERT_TRUE(second.has_value());
  store_->proclaim(second->ref(), "y");
  const auto revoked = store_->revoke(key);
  EXPECT_TRUE(revoked.revoked);
  EXPECT_EQ(revoked.fencing_token, second->fencing_token);
  EXPECT_FALSE(store_->read(key).has_value());
}

// A proclaimed session-bound leader (key on the session's lease, ADR-0018): the checked no-op
// extend still finds it, it is handed over, and a second one is reported by close_session
// with its token.
TEST_F(EtcdElectionsTest, ProclaimedSessionBoundLeaderExtendsHandsOverAndCloses) {
  const auto key = fresh_key("bound");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto bob = store_->open_session("bob", seconds(30));
  const auto leader = store_->try_grant(key, "alice", alice.session_id,
                                        GrantRequest::leader("a", LockLease::session()));
  ASSERT_TRUE(leader.has_value());
  const auto proclaimed = store_->proclaim(leader->ref(), "b");
  EXPECT_TRUE(proclaimed.session_bound);
  const auto raw = etcd_->raw().get(store::etcd::format_lock_key(key));
  ASSERT_TRUE(raw.has_value());
  EXPECT_NE(raw->lease, 0);
  const auto extended = store_->extend(leader->ref(), seconds(10));
  EXPECT_EQ(extended.fencing_token, leader->fencing_token);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("b"));
  const auto next = store_->handover(leader->ref(), "bob", bob.session_id, LockLease::session());
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
  EXPECT_FALSE(store_->read(key)->value.has_value());

  const auto other = fresh_key("bound-closed");
  const auto carol = store_->open_session("carol", seconds(30));
  const auto second = store_->try_grant(other, "carol", carol.session_id,
                                        GrantRequest::leader("c", LockLease::session()));
  ASSERT_TRUE(second.has_value());
  store_->proclaim(second->ref(), "d");
  const auto released = store_->close_session(carol.session_id);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].fencing_token, second->fencing_token);
  EXPECT_EQ(released[0].value, std::optional<std::string>("d"));
  EXPECT_FALSE(store_->read(other).has_value());
}

// The lock key's watch receives puts now (etcd cannot filter by value): a plain grant's put,
// first or re-entrant, is reported with its token (ADR-0036), never as a possible release; a
// leader's put is one.
TEST_F(EtcdElectionsTest, WatchWakesForALeaderNeverForAPlainGrant) {
  const auto key = fresh_key("watch");
  const auto alice = store_->open_session("alice", seconds(30));
  std::atomic<int> calls{0};
  std::atomic<FencingToken> granted_seen{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken granted) {
    if (granted == 0) ++calls;
    granted_seen = granted;
  });
  // The watch wakes once as etcd creates it (nothing was remembered for this key).
  ASSERT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)));
  // A window for further wake-ups of the watch's creation, which have no other sign.
  std::this_thread::sleep_for(milliseconds(200));
  const int created = calls.load();
  const auto lock =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(lock.has_value());
  const auto again =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(
      testing::wait_for([&] { return granted_seen.load() == again->fencing_token; }, seconds(10)))
      << "the re-entrant grant's put was not reported with its token";
  // A window in which a wrong wake-up would arrive (nothing happening has no sign).
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(calls.load(), created) << "a plain grant woke the waiters";
  const auto leader =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::leader("v", seconds(30)));
  ASSERT_TRUE(leader.has_value());
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() > created; }, seconds(10)))
      << "a leader's grant was not reported";
}

}  // namespace
}  // namespace dlock
