// Holder sets on the SQLite store (src/store/sqlite/sqlite_holders.h, ADR-0020) beyond the
// conformance matrix: what is particular to this backend's `lock_holders` table -- the exclusive
// acquire statement that also checks it, SQLite's RETURNING evaluating the liveness of
// session-bound holders, and holders kept across a reopen of the file (migrations, ADR-0013 clock).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_store.h"
#include "support/grant_asks.h"
#include "support/sqlite_store_fixture.h"

using dlock::testing::Ask;
using dlock::testing::permit_ask;
using dlock::testing::shared_ask;

namespace dlock::store::sqlite {
namespace {

using std::chrono::seconds;

const Ask kShared = shared_ask();

class SqliteHoldersTest : public testing::SqliteStoreFixture {
 protected:
  SqliteHoldersTest() : SqliteStoreFixture("dlock-sqlite-holders") {}

  std::optional<LockHandle> hold(const SessionInfo& session, const Ask& request,
                                 LockLease lease = seconds(30)) {
    return store_->try_grant("ns/k", session.owner_id, session.session_id, request(lease));
  }
};

// A dead session asking for a key that readers hold is told its session is gone (as for a key an
// exclusive grant holds), not "held": waiting would never help it.
TEST_F(SqliteHoldersTest, ExclusiveAcquireOfAReadHeldKeyByADeadSessionIsSessionNotFound) {
  const auto reader = store_->open_session("reader", seconds(30));
  const auto writer = store_->open_session("writer", seconds(30));
  ASSERT_TRUE(hold(reader, kShared).has_value());
  EXPECT_FALSE(
      store_->try_grant("ns/k", "writer", writer.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  store_->close_session(writer.session_id);
  EXPECT_THROW(
      store_->try_grant("ns/k", "writer", writer.session_id, GrantRequest::exclusive(seconds(30))),
      SessionNotFoundError);
}

// Release, close and revoke decide liveness in a RETURNING clause; a session-bound holder (NULL
// expiry) must come out live there too.
TEST_F(SqliteHoldersTest, SessionBoundHoldersAreLiveWhereTheyAreRemoved) {
  const auto alice = store_->open_session("alice", seconds(30));
  const auto bob = store_->open_session("bob", seconds(30));
  const auto carol = store_->open_session("carol", seconds(30));
  const auto a = hold(alice, kShared, LockLease::session());
  const auto b = hold(bob, kShared, LockLease::session());
  const auto c = hold(carol, kShared, LockLease::session());
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(
      store_->delete_if_owner(GrantRef{"ns/k", "alice", alice.session_id, a->fencing_token}));
  const auto closed = store_->close_session(bob.session_id);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0].session_bound);
  EXPECT_EQ(closed[0].mode, HoldMode::kShared);
  const auto revoked = store_->revoke("ns/k");
  EXPECT_TRUE(revoked.revoked);
  EXPECT_EQ(revoked.fencing_token, c->fencing_token);
}

// A reopened file keeps its holders (their leases on the resumed store clock) and its counter:
// the writer is still excluded, and every later token is greater.
TEST_F(SqliteHoldersTest, HoldersOutliveAReopenOfTheFile) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto bob = store_->open_session("bob", seconds(60));
  const auto reader = hold(alice, kShared);
  const auto permit = hold(bob, permit_ask(3), LockLease::session());
  ASSERT_FALSE(permit.has_value());  // a permit beside a shared holder is held
  ASSERT_TRUE(reader.has_value());
  reopen();
  const auto holders = store_->read_holders("ns/k");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, reader->fencing_token);
  EXPECT_EQ(holders[0].mode, HoldMode::kShared);
  EXPECT_FALSE(
      store_->try_grant("ns/k", "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  const auto second = hold(bob, kShared);
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->fencing_token, reader->fencing_token);
  EXPECT_TRUE(
      store_->delete_if_owner(GrantRef{"ns/k", "alice", alice.session_id, reader->fencing_token}));
}

}  // namespace
}  // namespace dlock::store::sqlite
