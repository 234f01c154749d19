// Holder sets on the PostgreSQL store (docs/adr/0020-more-primitives-design.md): the READ COMMITTED
// hazards, made deterministic. A second connection runs the real grant function in an open
// transaction, so it holds the group row's lock; the store's call then waits for that lock, and
// the open transaction commits a holder the waiting call must see. One statement that waited for
// the lock works on the holders as of before it waited; these tests fail when a decision about
// the holders is taken in that statement.

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dlock/errors.h"
#include "store/pg/pg_connection.h"
#include "store/pg/pg_statements.h"
#include "store/pg/pg_store.h"
#include "support/grant_asks.h"
#include "support/postgres_server.h"
#include "util/backend_wrapper.h"
#include "util/ids.h"

using dlock::testing::Ask;
using dlock::testing::shared_ask;

namespace dlock::store::pg {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCallTimeout{5000};
const Ask kShared = shared_ask();

class PgHoldersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new dlock::testing::PostgresServer();
    server_->ensure_database("dlock_holders");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    store_ = make_pg_store({url(), 4, kCallTimeout, {}});  // applies the migrations
    rival_ = std::make_unique<PgConnection>(url(), kCallTimeout, std::vector<PreparedStatement>{});
    observer_ =
        std::make_unique<PgConnection>(url(), kCallTimeout, std::vector<PreparedStatement>{});
  }

  static std::string url() { return server_->url("dlock_holders"); }
  static std::string key() { return "holders/" + util::random_id(); }
  std::string session(milliseconds ttl = milliseconds(30000)) {
    return store_->open_session("owner", ttl).session_id;
  }

  // On the rival connection: BEGIN, then the grant function (the group row stays locked until
  // commit_rival). `ttl_ms` 0: session-bound. Returns the rival's token (0: held).
  long long rival_grant(const std::string& k, const std::string& s, const std::string& mode,
                        int limit, int ttl_ms = 60000) {
    rival_->run("BEGIN");
    const auto granted = rival_->run("SELECT fencing_token FROM dlock_grant_holder('" + k +
                                     "', 'rival', '" + s + "', " + std::to_string(ttl_ms) + ", '" +
                                     mode + "', " + std::to_string(limit) + ")");
    return granted.rows() == 1 ? granted.int64(0, 0) : 0;
  }
  void commit_rival() { rival_->run("COMMIT"); }

  // Waits until some statement of this database waits for a lock (the store's call behind the
  // rival's transaction); fails the test when none does within the call timeout.
  void wait_until_blocked() {
    const auto deadline = std::chrono::steady_clock::now() + kCallTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto waiting = observer_->run(
          "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
          "AND wait_event_type = 'Lock'");
      if (waiting.int64(0, 0) > 0) return;
      std::this_thread::sleep_for(milliseconds(5));  // the poll interval
    }
    FAIL() << "the store's call never waited for the rival's lock";
  }

  static dlock::testing::PostgresServer* server_;
  BackendPtr store_;
  std::unique_ptr<PgConnection> rival_;
  std::unique_ptr<PgConnection> observer_;
};

dlock::testing::PostgresServer* PgHoldersTest::server_ = nullptr;

// A semaphore of one permit: the rival takes it while the store's grant waits for the group row.
// The count after the lock sees the rival's permit: held.
TEST_F(PgHoldersTest, PermitCountSeesAPermitCommittedWhileTheGrantWaited) {
  const auto k = key();
  const auto rival_session = session(), mine = session();
  ASSERT_GT(rival_grant(k, rival_session, "permit", 1), 0);
  auto granted = std::async(std::launch::async, [&] {
    return store_->try_grant(k, "owner", mine, GrantRequest::permit(1, milliseconds(60000)));
  });
  wait_until_blocked();
  commit_rival();
  EXPECT_FALSE(granted.get()) << "a second permit of one was granted";
  EXPECT_EQ(store_->read_holders(k).size(), 1u);
}

// A reader releases while a second reader is granted: the release's recomputation of the group
// expiry, after the lock, sees the second reader, so a writer stays excluded.
TEST_F(PgHoldersTest, ReleaseSeesAReaderCommittedWhileItWaited) {
  const auto k = key();
  const auto reader = session(), rival_session = session(), writer = session();
  const auto first = store_->try_grant(k, "owner", reader, kShared(milliseconds(60000)));
  ASSERT_TRUE(first);
  ASSERT_GT(rival_grant(k, rival_session, "shared", 0), 0);
  auto released = std::async(std::launch::async, [&] {
    return store_->delete_if_owner(GrantRef{k, "owner", reader, first->fencing_token});
  });
  wait_until_blocked();
  commit_rival();
  EXPECT_TRUE(released.get());
  ASSERT_EQ(store_->read_holders(k).size(), 1u);
  EXPECT_FALSE(store_->try_grant(k, "owner", writer, GrantRequest::exclusive(milliseconds(60000))))
      << "a writer was granted while a reader lives";
}

// A session-bound reader is granted while its session's heartbeat waits: the heartbeat raises
// the group row over it, so once the session's first expiry has passed (the heartbeat renewed
// it) a writer is still excluded.
TEST_F(PgHoldersTest, HeartbeatRaisesTheGroupOfAReaderGrantedWhileItWaited) {
  const auto k = key();
  const auto reader = session(milliseconds(2000)), writer = session();
  ASSERT_GT(rival_grant(k, reader, "shared", 0, 0), 0);
  // Real time: half the reader's session TTL passes on PostgreSQL's clock.
  std::this_thread::sleep_for(milliseconds(1000));
  auto beat = std::async(std::launch::async, [&] { return store_->heartbeat(reader); });
  wait_until_blocked();
  commit_rival();
  beat.get();
  std::this_thread::sleep_for(milliseconds(1300));  // past the first expiry, before the renewed
  ASSERT_TRUE(store_->get_session(reader));
  EXPECT_EQ(store_->read_holders(k).size(), 1u);
  EXPECT_FALSE(store_->try_grant(k, "owner", writer, GrantRequest::exclusive(milliseconds(60000))))
      << "a writer was granted while a session-bound reader lives";
}

// revoke removes the group row, then (after its lock) every holder granted before: a reader
// committed while the revoke waited is removed too, none is left behind without a group row.
TEST_F(PgHoldersTest, RevokeRemovesAReaderCommittedWhileItWaited) {
  const auto k = key();
  const auto reader = session(), rival_session = session(), writer = session();
  ASSERT_TRUE(store_->try_grant(k, "owner", reader, kShared(milliseconds(60000))));
  const auto rival_token = rival_grant(k, rival_session, "shared", 0);
  ASSERT_GT(rival_token, 0);
  auto revoked = std::async(std::launch::async, [&] { return store_->revoke(k); });
  wait_until_blocked();
  commit_rival();
  const auto outcome = revoked.get();
  EXPECT_TRUE(outcome.revoked);
  EXPECT_EQ(outcome.fencing_token, static_cast<FencingToken>(rival_token));
  EXPECT_TRUE(store_->read_holders(k).empty()) << "a reader outlived the revoke";
  EXPECT_TRUE(store_->try_grant(k, "owner", writer, GrantRequest::exclusive(milliseconds(60000))));
}

// A group row is no grant of its own: it never answers as one, its owner and session match no
// real grant, and the reaper leaves it alone while its holders live.
TEST_F(PgHoldersTest, GroupRowIsNeverReportedOrReapedWhileItsHoldersLive) {
  const auto k = key();
  const auto reader = session(), other = session();
  const auto held = store_->try_grant(k, "owner", reader, kShared(milliseconds(60000)));
  ASSERT_TRUE(held);
  store_->reap_expired();
  const auto listed = store_->list("holders/", {}, 1000);
  for (const auto& info : listed) {
    if (info.key == k) {
      EXPECT_EQ(info.session_id, reader);
      EXPECT_EQ(info.mode, HoldMode::kShared);
    }
  }
  ASSERT_EQ(store_->read_holders(k).size(), 1u);
  // The group row's own owner and session ('') are refused at the store boundary, and the store
  // itself, reached past its ValidatingBackend, releases nothing for them.
  const GrantRef group_row{k, "", "", held->fencing_token};
  EXPECT_THROW(store_->delete_if_owner(group_row), InvalidArgumentError);
  EXPECT_FALSE(dynamic_cast<util::BackendWrapper&>(*store_).target().delete_if_owner(group_row));
  EXPECT_FALSE(store_->try_grant(k, "owner", other, GrantRequest::exclusive(milliseconds(60000))));
  EXPECT_TRUE(store_->delete_if_owner(GrantRef{k, "owner", reader, held->fencing_token}));
  EXPECT_TRUE(store_->try_grant(k, "owner", other, GrantRequest::exclusive(milliseconds(60000))));
}

// A reader that shortens its own lease (re-acquire, extend) shortens the group row with it: once
// that lease has passed, no reader lives and a writer is granted without a reaper.
TEST_F(PgHoldersTest, AReaderShorteningItsLeaseShortensTheGroup) {
  const auto reacquired = key(), extended = key();
  const auto reader = session(), writer = session();
  ASSERT_TRUE(store_->try_grant(reacquired, "owner", reader, kShared(milliseconds(60000))));
  ASSERT_TRUE(store_->try_grant(reacquired, "owner", reader, kShared(milliseconds(1000))));
  const auto held = store_->try_grant(extended, "owner", reader, kShared(milliseconds(60000)));
  ASSERT_TRUE(held);
  store_->extend(held->ref(), milliseconds(1000));
  // Real time: past the 1 s TTLs on PostgreSQL's clock.
  std::this_thread::sleep_for(milliseconds(1300));
  EXPECT_TRUE(
      store_->try_grant(reacquired, "owner", writer, GrantRequest::exclusive(milliseconds(60000))));
  EXPECT_TRUE(
      store_->try_grant(extended, "owner", writer, GrantRequest::exclusive(milliseconds(60000))));
}

// Token order (docs/adr/0021-pg-token-order.md): an acquire takes its token before it finds the
// conflicting row it must wait for. Here the row vanishes while it waits, and in between a rival
// grants the key (a greater token) and lets it go again, all in one open transaction. Unfenced,
// the acquire then inserts with its early token, smaller than the rival's committed one. Fenced,
// the rival cannot mint while the acquire holds the key's fence: one of the two is refused as a
// deadlock (PostgreSQL finds it after deadlock_timeout) and no token goes backwards. Which one
// depends on timing: a refused rival rolls back everything in its transaction.
class PgTokenOrderTest : public PgHoldersTest {
 protected:
  // Runs the rival's grant-and-release in its open transaction; returns the token it committed
  // (0: it was refused, its transaction rolled back).
  long long rival_grant_and_release(const std::string& k, const std::string& s,
                                    const std::string& grant, const std::string& release) {
    try {
      const auto granted = rival_->run(grant);
      if (granted.rows() != 1) {
        rival_->run("ROLLBACK");
        return 0;
      }
      const auto token = std::to_string(granted.int64(0, 0));
      rival_->run(release + "('" + k + "', 'rival', '" + s + "', " + token + ")");
      commit_rival();
      return granted.int64(0, 0);
    } catch (const std::exception&) {
      rival_->run("ROLLBACK");
      return 0;
    }
  }

  // The acquire that waited: its token, or 0 when it was held or refused.
  static long long outcome(std::future<std::optional<LockHandle>>& acquired) {
    try {
      const auto handle = acquired.get();
      return handle ? static_cast<long long>(handle->fencing_token) : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
};

// The last reader's release deletes the group row while the writer's acquire waits for it; the
// rival's reader grant in that window mints a greater token (the race of the conformance case
// HolderRaceNeverGrantsAWriterBesideALiveReader, made deterministic).
TEST_F(PgTokenOrderTest, AWriterWhoseRowVanishedWhileItWaitedOutranksTheReaderBetween) {
  const auto k = key();
  const auto reader = session(), rival_session = session(), writer = session();
  const auto first = store_->try_grant(k, "owner", reader, kShared(milliseconds(60000)));
  ASSERT_TRUE(first);
  rival_->run("BEGIN");
  rival_->run("SELECT * FROM dlock_release_holder('" + k + "', 'owner', '" + reader + "', " +
              std::to_string(first->fencing_token) + ")");
  auto acquired = std::async(std::launch::async, [&] {
    return store_->try_grant(k, "owner", writer, GrantRequest::exclusive(milliseconds(60000)));
  });
  wait_until_blocked();
  auto rival = std::async(std::launch::async, [&] {
    return rival_grant_and_release(k, rival_session,
                                   "SELECT fencing_token FROM dlock_grant_holder('" + k +
                                       "', 'rival', '" + rival_session + "', 60000, 'shared', 0)",
                                   "SELECT * FROM dlock_release_holder");
  });
  const auto writer_token = outcome(acquired);
  const auto rival_token = rival.get();
  if (writer_token != 0 && rival_token != 0) {
    EXPECT_GT(writer_token, rival_token)
        << "the writer was granted a token smaller than a reader's committed before it";
  }
  if (writer_token == 0 && rival_token == 0) {
    // The rival was the deadlock's victim: its transaction, the reader's release in it, rolled
    // back, so the reader holds still and the writer was answered held.
    const auto holders = store_->read_holders(k);
    ASSERT_EQ(holders.size(), 1u) << "neither grant went through, and the reader is gone";
    EXPECT_EQ(holders[0].session_id, reader);
  }
}

// The same with exclusive grants only: the rival holds the row, hands the lock over (a greater
// token) and releases it, while the acquire waits for the row it found live.
TEST_F(PgTokenOrderTest, AnAcquireWhoseRowVanishedWhileItWaitedOutranksTheHandoverBetween) {
  const auto k = key();
  const auto holder = session(), next = session(), waiter = session();
  const auto held =
      store_->try_grant(k, "owner", holder, GrantRequest::exclusive(milliseconds(60000)));
  ASSERT_TRUE(held);
  PgConnection rival(url(), kCallTimeout, prepared_statements());
  rival.run("BEGIN");
  rival.run("SELECT 1 FROM locks WHERE key = '" + k + "' FOR UPDATE");
  auto acquired = std::async(std::launch::async, [&] {
    return store_->try_grant(k, "owner", waiter, GrantRequest::exclusive(milliseconds(60000)));
  });
  wait_until_blocked();
  auto handed = std::async(std::launch::async, [&]() -> long long {
    try {
      const auto token = std::to_string(held->fencing_token);
      const auto over =
          rival.execute("handover", {k, "owner", holder, token, "rival", next, "60000"});
      if (over.rows() != 1) {
        rival.run("ROLLBACK");
        return 0;
      }
      const auto next_token = over.text(0, 0);
      rival.execute("delete_if_owner", {k, "rival", next, next_token});
      rival.run("COMMIT");
      return over.int64(0, 0);
    } catch (const std::exception&) {
      rival.run("ROLLBACK");
      return 0;
    }
  });
  const auto waiter_token = outcome(acquired);
  const auto handed_token = handed.get();
  if (waiter_token != 0 && handed_token != 0) {
    EXPECT_GT(waiter_token, handed_token)
        << "the acquire was granted a token smaller than a hand-over's committed before it";
  }
  if (waiter_token == 0 && handed_token == 0) {
    // The rival was the deadlock's victim: its hand-over rolled back, so the holder holds still
    // and the acquire was answered held.
    const auto current = store_->read(k);
    ASSERT_TRUE(current) << "neither grant went through, and the holder is gone";
    EXPECT_EQ(current->session_id, holder);
  }
}

}  // namespace
}  // namespace dlock::store::pg
