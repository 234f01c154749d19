// Elections on the PostgreSQL store (docs/adr/0020-more-primitives-design.md, "Leader election";
// src/store/pg/pg_statements.h, kAcquireLeader and kProclaim), what the conformance matrix cannot
// see: a new leader or value is announced on channel dlock_release, but every other write stays
// silent (a plain grant notifying would wake every waiter of the key on every grant, the hot-key
// path's cost), and a proclaim needs its leader's session live, as extend does.
//
// No sleeping: a listener connection delivers notifications in commit order, so once the
// notification of a later leader grant (on another key) has arrived, any notification of the
// earlier plain writes would have arrived before it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "dlock/errors.h"
#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#include "support/subprocess.h"
#include "util/ids.h"

namespace dlock::store::pg {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kCallTimeout{5000};

class PgElectionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new dlock::testing::PostgresServer();
    server_->ensure_database("dlock_elections");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    store_ = make_pg_store({server_->url("dlock_elections"), 4, kCallTimeout, {}});
  }

  static std::string key() { return "elections/" + util::random_id(); }

  // Subscribes to a fresh key, elects a leader there and waits for its notification: every
  // notification committed before the call has been delivered once this returns.
  void drain_notifications(const SessionInfo& session) {
    const auto marker = key();
    std::atomic<int> calls{0};
    auto subscription = store_->watch_releases(marker, [&](FencingToken) { ++calls; });
    ASSERT_TRUE(store_->try_grant(marker, session.owner_id, session.session_id,
                                  GrantRequest::leader("marker", seconds(30))));
    ASSERT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
        << "a leader grant was not announced";
  }

  static dlock::testing::PostgresServer* server_;
  BackendPtr store_;
};

dlock::testing::PostgresServer* PgElectionsTest::server_ = nullptr;

// Only a hand-over is announced, with its token (ADR-0036), never as a possible release.
TEST_F(PgElectionsTest, GrantsWithoutAValueNotifyNobody) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto bob = store_->open_session("bob", seconds(60));
  const auto plain = key();
  std::atomic<int> calls{0};
  std::atomic<FencingToken> handed{0};
  auto subscription = store_->watch_releases(plain, [&](FencingToken granted) {
    if (granted == 0) ++calls;
    handed = granted;
  });

  // A fresh grant, a re-entrant one (the upsert's DO UPDATE), an extend and a handover.
  ASSERT_TRUE(
      store_->try_grant(plain, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  const auto again =
      store_->try_grant(plain, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(again);
  const auto extended = store_->extend(again->ref(), seconds(40));
  const auto next = store_->handover(extended.ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(next);
  // A held attempt and a shared holder of another name write nothing with a value either.
  EXPECT_FALSE(
      store_->try_grant(plain, "alice", alice.session_id, GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(
      store_->try_grant(key(), "alice", alice.session_id, GrantRequest::shared(seconds(30))));

  drain_notifications(alice);
  EXPECT_EQ(calls.load(), 0) << "a grant without a value notified the key's waiters";
  EXPECT_EQ(handed.load(), next->fencing_token) << "the hand-over was not announced";
}

TEST_F(PgElectionsTest, ExtendingALeaderNotifiesNobody) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto name = key();
  const auto leader =
      store_->try_grant(name, "alice", alice.session_id, GrantRequest::leader("a", seconds(30)));
  ASSERT_TRUE(leader);
  drain_notifications(alice);  // the leader's own announcement is delivered before this returns

  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(name, [&](FencingToken) { ++calls; });
  store_->extend(leader->ref(), seconds(40));
  drain_notifications(alice);
  EXPECT_EQ(calls.load(), 0) << "an extend (no new leader, no new value) notified";
  EXPECT_EQ(store_->read(name)->value, std::optional<std::string>("a"));
}

// A proclaim is a write by the leader: like extend, it needs the leader's session live, also
// for a grant with a TTL of its own that outlives its session (which read still reports).
TEST_F(PgElectionsTest, ProclaimNeedsTheLeadersSessionLive) {
  const auto alice = store_->open_session("alice", seconds(1));
  const auto name = key();
  const auto leader =
      store_->try_grant(name, "alice", alice.session_id, GrantRequest::leader("a", seconds(60)));
  ASSERT_TRUE(leader);
  ASSERT_TRUE(
      testing::wait_for([&] { return !store_->get_session(alice.session_id); }, seconds(10)));
  EXPECT_THROW(store_->proclaim(leader->ref(), "b"), LockLostError);
  EXPECT_THROW(store_->extend(leader->ref(), seconds(30)), LockLostError);
}

}  // namespace
}  // namespace dlock::store::pg
