// Lock-delay on etcd (docs/adr/0020-more-primitives-design.md "Lock-delay"; C2 "Lock-delay
// (pg, sqlite, etcd)"; src/store/etcd/etcd_delays.h) against a real single-member etcd: what the
// conformance matrix cannot see from the SPI. A session without a lock-delay writes no marker; a
// release, a hand-over to a session without one and close_session leave none behind; and the
// plain acquire/release pair's cost, printed for the record (no bound asserted: a shared
// machine's timings are not a test).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#include "support/etcd_store_fixture.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class EtcdLockDelayTest : public testing::EtcdStoreFixture {
 protected:
  EtcdLockDelayTest() : EtcdStoreFixture("etcd-lock-delay") {}

  // Whether the lock-delay marker of `key`'s exclusive grant exists.
  bool marked(const std::string& key) {
    const auto lock_key = store::etcd::format_lock_key(key);
    return etcd_->raw().get(store::etcd::marker_key(key, lock_key)).has_value();
  }
};

TEST_F(EtcdLockDelayTest, NoLockDelayWritesNoMarker) {
  const auto key = fresh_key("none"), shared = fresh_key("shared");
  const auto alice = store_->open_session("alice", seconds(30));
  ASSERT_TRUE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  EXPECT_FALSE(marked(key));
  ASSERT_TRUE(
      store_->try_grant(shared, "alice", alice.session_id, GrantRequest::shared(seconds(30))));
  const auto holder = store::etcd::shared_holder_key(shared, alice.session_id);
  EXPECT_FALSE(etcd_->raw().get(store::etcd::marker_key(shared, holder)).has_value());
}

TEST_F(EtcdLockDelayTest, ReleaseHandoverAndCloseLeaveNoMarker) {
  const auto released = fresh_key("released"), handed = fresh_key("handed"),
             closed = fresh_key("closed"), bound = fresh_key("bound");
  const auto alice = store_->open_session("alice", seconds(30), seconds(5));
  const auto bob = store_->open_session("bob", seconds(30));

  const auto first =
      store_->try_grant(released, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(marked(released)) << "a grant of a session with a lock-delay has no marker";
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{released, "alice", alice.session_id, first->fencing_token}));
  EXPECT_FALSE(marked(released)) << "a release left its marker";

  const auto from =
      store_->try_grant(handed, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(from.has_value());
  ASSERT_TRUE(store_->handover(from->ref(), "bob", bob.session_id, seconds(30)));
  EXPECT_FALSE(marked(handed)) << "a hand-over to a session without a lock-delay kept the marker";

  ASSERT_TRUE(
      store_->try_grant(closed, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(store_->try_grant(bound, "alice", alice.session_id,
                                GrantRequest::exclusive(LockLease::session())));
  EXPECT_TRUE(marked(closed) && marked(bound));
  store_->close_session(alice.session_id);
  EXPECT_FALSE(marked(closed)) << "close_session left the marker of a TTL grant";
  EXPECT_FALSE(marked(bound)) << "close_session left the marker of a session-bound grant";
  store_->reap_expired();  // nothing for the reaper to turn into a delay
  EXPECT_TRUE(
      store_->try_grant(closed, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))));
  EXPECT_TRUE(
      store_->try_grant(bound, "bob", bob.session_id, GrantRequest::exclusive(seconds(30))));
}

// The plain (no lock-delay) acquire + release pair, one client, printed: the figure the
// lock-delay change is asked not to move (one more compare in the acquire Txn).
TEST_F(EtcdLockDelayTest, PlainAcquireReleasePairCost) {
  const auto alice = store_->open_session("alice", seconds(30));
  const auto key = fresh_key("pairs");
  constexpr int kPairs = 400;
  const auto started = SteadyClock::now();
  for (int i = 0; i < kPairs; ++i) {
    const auto held =
        store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
    ASSERT_TRUE(held.has_value());
    ASSERT_TRUE(
        store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, held->fencing_token}));
  }
  const auto took =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started);
  std::cout << "plain acquire+release pair: " << took.count() / kPairs << " us (mean of " << kPairs
            << ")\n";
}

}  // namespace
}  // namespace dlock
