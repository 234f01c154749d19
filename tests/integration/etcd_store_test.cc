// The etcd store against a real single-member etcd: the store's promises of ADR-0006 (one grant
// per key, token = the granting Txn's revision, strictly increasing tokens, a token that does not
// move with unrelated writes) as named tests, plus what only etcd has (the store's own watch
// stream, an etcd crash). The conformance matrix covers the SPI itself.

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

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
using store::etcd::format_lock_key;

class EtcdStoreTest : public testing::EtcdStoreFixture {
 protected:
  EtcdStoreTest() : EtcdStoreFixture("etcd-test") {}
};

// One grant per key (ADR-0006, one Txn guarded by CreateRevision == 0). Many rounds, because a
// read-then-write acquire loses only some races.
TEST_F(EtcdStoreTest, ConcurrentAcquiresOfOneKeyYieldExactlyOneGrant) {
  constexpr int kThreads = 6;
  constexpr int kRounds = 60;
  std::vector<SessionInfo> sessions;
  for (int i = 0; i < kThreads; ++i) {
    sessions.push_back(store_->open_session("racer-" + std::to_string(i), seconds(60)));
  }
  std::set<FencingToken> tokens;
  for (int round = 0; round < kRounds; ++round) {
    const auto key = fresh_key("race");
    std::atomic<int> grants{0};
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    std::vector<FencingToken> won(kThreads, 0);
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        const auto handle = store_->try_grant(key, sessions[i].owner_id, sessions[i].session_id,
                                              GrantRequest::exclusive(seconds(30)));
        if (handle) {
          ++grants;
          won[i] = handle->fencing_token;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_EQ(grants.load(), 1) << "round " << round << ": " << grants.load()
                                << " racing acquires of one free key were granted";
    for (const auto token : won) {
      if (token != 0) {
        EXPECT_TRUE(tokens.insert(token).second) << "token " << token << " reused";
      }
    }
  }
}

// Token = revision (ADR-0006): the token is the revision etcd reported for the granting Txn.
// Nothing else writes to this etcd while the hook runs, so the store's revision right after the Txn
// answered is that Txn's revision.
TEST_F(EtcdStoreTest, TokenEqualsGrantingTxnHeaderRevisionAndIsNonZero) {
  std::int64_t revision_after_grant = 0;
  auto store =
      make_store([&](std::string_view) { revision_after_grant = etcd_->raw().current_revision(); });
  const auto session = store->open_session("alice", seconds(60));
  const auto key = fresh_key("token");
  const std::int64_t before = etcd_->raw().current_revision();
  const auto handle =
      store->try_grant(key, "alice", session.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  EXPECT_GT(handle->fencing_token, 0u);
  EXPECT_GT(static_cast<std::int64_t>(handle->fencing_token), before);
  EXPECT_EQ(static_cast<std::int64_t>(handle->fencing_token), revision_after_grant);
  const auto raw = etcd_->raw().get(format_lock_key(key));
  ASSERT_TRUE(raw.has_value());
  // One write created the key: its create and mod revisions are both the Txn's revision.
  EXPECT_EQ(static_cast<std::int64_t>(handle->fencing_token), raw->mod_revision);
  EXPECT_EQ(static_cast<std::int64_t>(handle->fencing_token), raw->create_revision);
}

// Tokens strictly increase across grants of one key, whoever deleted the previous one (ADR-0006).
TEST_F(EtcdStoreTest, AcquireRawDeleteCyclesGiveStrictlyIncreasingTokens) {
  const auto session = store_->open_session("alice", seconds(60));
  const auto key = fresh_key("cycles");
  std::vector<FencingToken> tokens;
  for (int cycle = 0; cycle < 8; ++cycle) {
    const auto handle =
        store_->try_grant(key, "alice", session.session_id, GrantRequest::exclusive(seconds(30)));
    ASSERT_TRUE(handle.has_value()) << "cycle " << cycle;
    tokens.push_back(handle->fencing_token);
    etcd_->raw().remove(format_lock_key(key));  // bypasses the store entirely
  }
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "cycle " << i << " repeated or lowered the token";
  }
}

// Token = revision of the granting Txn, not the current one (ADR-0006): unrelated writes move the
// cluster revision; the handle's token must not move with them. The first write lands between the
// granting Txn's answer and try_grant's return, where a re-read of the token would see it.
TEST_F(EtcdStoreTest, UnrelatedWriteAfterGrantDoesNotChangeTheToken) {
  const std::string unrelated = "/unrelated/" + fresh_key("noise");
  std::int64_t noise_revision = 0;
  auto store =
      make_store([&](std::string_view) { noise_revision = etcd_->raw().put(unrelated, "noise"); });
  const auto session = store->open_session("alice", seconds(60));
  const auto key = fresh_key("no-refresh");
  const auto handle =
      store->try_grant(key, "alice", session.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  const FencingToken granted = handle->fencing_token;
  EXPECT_LT(static_cast<std::int64_t>(granted), noise_revision)
      << "the token was read after the unrelated write";
  etcd_->raw().put(unrelated, "more noise");
  EXPECT_EQ(handle->fencing_token, granted);
  EXPECT_EQ(etcd_->raw().get(format_lock_key(key))->mod_revision,
            static_cast<std::int64_t>(granted));
  EXPECT_EQ(store->read(key)->fencing_token, granted);
  EXPECT_EQ(store->extend(handle->ref(), seconds(30)).fencing_token, granted);
  EXPECT_TRUE(store->delete_if_owner(GrantRef{key, "alice", session.session_id, granted}));
}

TEST_F(EtcdStoreTest, LockKeyLayoutAndValue) {
  const auto session = store_->open_session("alice", seconds(60));
  const auto handle = store_->try_grant("payments/batch/17", "alice", session.session_id,
                                        GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  const auto raw = etcd_->raw().get("/dlock/payments/lock/batch/17");
  ASSERT_TRUE(raw.has_value());
  EXPECT_NE(raw->lease, 0) << "a grant lives on a lease";
  EXPECT_NE(raw->value.find("alice"), std::string::npos);
  EXPECT_NE(raw->value.find(session.session_id), std::string::npos);
  EXPECT_EQ(store::etcd::parse_lock_key("/dlock/payments/lock/batch/17"), "payments/batch/17");
  EXPECT_THROW(store_->try_grant("no-namespace", "alice", session.session_id,
                                 GrantRequest::exclusive(seconds(30))),
               InvalidArgumentError);
}

// C2: the session ID is random and the record under it names the lease; the ID is not the lease
// ID in any spelling.
TEST_F(EtcdStoreTest, SessionIdIsNotTheLeaseId) {
  const auto session = store_->open_session("alice", seconds(60));
  const auto record = etcd_->raw().get("/dlock/_sessions/" + session.session_id);
  ASSERT_TRUE(record.has_value()) << "the session record is keyed by the session ID";
  ASSERT_NE(record->lease, 0) << "the session record lives on the session's lease";
  EXPECT_EQ(session.session_id.size(), 32u);
  const std::uint64_t id_tail = std::stoull(session.session_id.substr(16), nullptr, 16);
  const std::uint64_t id_head = std::stoull(session.session_id.substr(0, 16), nullptr, 16);
  EXPECT_NE(id_tail, static_cast<std::uint64_t>(record->lease));
  EXPECT_NE(id_head, static_cast<std::uint64_t>(record->lease));
  EXPECT_EQ(session.session_id.find(std::to_string(record->lease)), std::string::npos);
}

// Several dlockd share one etcd: a session opened through one store works through another
// (whose cache misses), and one closed through the other is gone for the first (whose cache
// still had it).
TEST_F(EtcdStoreTest, SessionOpenedThroughOneStoreWorksThroughAnother) {
  const auto other = make_store();
  const auto session = store_->open_session("alice", seconds(60));
  EXPECT_EQ(store_->heartbeat(session.session_id).owner_id, "alice");
  EXPECT_EQ(other->heartbeat(session.session_id).owner_id, "alice");
  ASSERT_TRUE(other->get_session(session.session_id).has_value());
  const auto key = fresh_key("other-store");
  const auto handle =
      other->try_grant(key, "alice", session.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  const auto released = other->close_session(session.session_id);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].key, key);
  EXPECT_THROW(store_->heartbeat(session.session_id), SessionNotFoundError);
  EXPECT_FALSE(store_->get_session(session.session_id).has_value());
  EXPECT_THROW(store_->close_session(session.session_id), SessionNotFoundError);
  EXPECT_THROW(store_->try_grant(fresh_key("closed"), "alice", session.session_id,
                                 GrantRequest::exclusive(seconds(30))),
               SessionNotFoundError);
}

// A waiter's watch starts right after the revision its failed acquire saw: a release after that
// is reported even if it happened before the watch existed, and nothing fires before it.
TEST_F(EtcdStoreTest, WatchStartsAfterTheRevisionSeenHeld) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto bob = store_->open_session("bob", seconds(60));
  const auto key = fresh_key("watch");
  const auto held =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(held.has_value());
  ASSERT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                   .has_value());
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  // A full round trip through etcd, then: no event, no call.
  etcd_->raw().put("/unrelated/" + key, "x");
  store_->read(key);
  EXPECT_EQ(calls.load(), 0) << "spurious wake-up from a watch that knew its start revision";
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, held->fencing_token}));
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)));

  // Released before the subscription existed: replayed from the remembered revision.
  const auto again =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(again.has_value());
  ASSERT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                   .has_value());
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, again->fencing_token}));
  std::atomic<int> late_calls{0};
  auto late = store_->watch_releases(key, [&](FencingToken) { ++late_calls; });
  EXPECT_TRUE(testing::wait_for([&] { return late_calls.load() >= 1; }, seconds(10)))
      << "a release between the failed acquire and the watch was missed";
}

TEST_F(EtcdStoreTest, LeaseExpiryOfAGrantIsReportedAsARelease) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto bob = store_->open_session("bob", seconds(60));
  const auto key = fresh_key("lease-expiry");
  ASSERT_TRUE(store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(1)))
                  .has_value());
  // A failed acquire first, so the watch starts at a known revision and cannot fire spuriously.
  ASSERT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                   .has_value());
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)));
  EXPECT_FALSE(store_->read(key).has_value()) << "woken before the grant's lease expired";
}

// A released grant's lease goes back to the store's pool and carries the next grant of the same
// TTL, renewed: the new lock lives its whole TTL from its own grant, not what was left of the
// lease. `pause` decides how: a lease known to outlive the Txn's deadline (2 s here) by a
// second is renewed in parallel with the Txn, any other before it.
class PooledLeaseTest : public EtcdStoreTest {
 protected:
  void expect_reused_and_renewed(std::chrono::seconds ttl, milliseconds pause) {
    const auto alice = store_->open_session("alice", seconds(60));
    const auto first_key = fresh_key("pooled-a");
    const auto first =
        store_->try_grant(first_key, "alice", alice.session_id, GrantRequest::exclusive(ttl));
    ASSERT_TRUE(first.has_value());
    const auto first_raw = etcd_->raw().get(format_lock_key(first_key));
    ASSERT_TRUE(first_raw.has_value());
    ASSERT_TRUE(store_->delete_if_owner(
        GrantRef{first_key, "alice", alice.session_id, first->fencing_token}));

    // Real time: the lease's age when the next grant reuses it is the case under test.
    std::this_thread::sleep_for(pause);
    const auto second_key = fresh_key("pooled-b");
    const auto before = SteadyClock::now();
    const auto second =
        store_->try_grant(second_key, "alice", alice.session_id, GrantRequest::exclusive(ttl));
    ASSERT_TRUE(second.has_value());
    EXPECT_GE(second->client_deadline, before + ttl) << "the grant was promised less than its TTL";
    const auto second_raw = etcd_->raw().get(format_lock_key(second_key));
    ASSERT_TRUE(second_raw.has_value());
    ASSERT_EQ(second_raw->lease, first_raw->lease) << "the released grant's lease was not reused";

    // Unrenewed, the lease would end `pause` before the new grant's TTL is up.
    std::this_thread::sleep_until(before + ttl - pause / 2);
    const auto still = store_->read(second_key);
    ASSERT_TRUE(still.has_value()) << "the reused lease expired before the new grant's TTL";
    EXPECT_EQ(still->fencing_token, second->fencing_token);
    // And it still ends by itself (etcd checks expiries every 500 ms and revokes them through
    // raft: seconds late on a loaded machine; never, if something kept renewing it).
    EXPECT_TRUE(
        testing::wait_for([&] { return !store_->read(second_key).has_value(); }, seconds(10)));
  }
};

// 4 s TTL, 1.2 s in the pool: 2.8 s left, under the 3 s margin, so renewed before the Txn.
TEST_F(PooledLeaseTest, ReusedGrantLeaseIsRenewedBeforeTheTxn) {
  expect_reused_and_renewed(seconds(4), milliseconds(1200));
}

// 5 s TTL, 1 s in the pool: 4 s left, so renewed in parallel with the Txn.
TEST_F(PooledLeaseTest, ReusedGrantLeaseIsRenewedAlongsideTheTxn) {
  expect_reused_and_renewed(seconds(5), milliseconds(1000));
}

// A revoked grant's lease still carries the session's index entry, so it must be revoked, never
// pooled: otherwise the next grant would ride on a lease holding another grant's entry.
TEST_F(EtcdStoreTest, RevokedGrantLeaseIsNotReused) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto revoked_key = fresh_key("revoked");
  ASSERT_TRUE(
      store_
          ->try_grant(revoked_key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  const auto revoked_raw = etcd_->raw().get(format_lock_key(revoked_key));
  ASSERT_TRUE(revoked_raw.has_value());
  ASSERT_TRUE(store_->revoke(revoked_key).revoked);
  const auto next_key = fresh_key("after-revoke");
  ASSERT_TRUE(
      store_->try_grant(next_key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  const auto next_raw = etcd_->raw().get(format_lock_key(next_key));
  ASSERT_TRUE(next_raw.has_value());
  EXPECT_NE(next_raw->lease, revoked_raw->lease);
}

// Killing the only member: every call is an error, never "held", and the watch stream and
// the channel come back by themselves when etcd does.
TEST_F(EtcdStoreTest, SingleMemberKillSurfacesUnavailableNeverHeld) {
  const auto alice = store_->open_session("alice", seconds(60));
  const auto bob = store_->open_session("bob", seconds(60));
  const auto key = fresh_key("outage");
  const auto handle =
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  // A pooled grant lease and an open keep-alive stream, so the outage hits both: an acquire then
  // begins with a keep-alive on that stream.
  {
    // Held at once, so they are two leases; released, both go to the pool.
    const auto first_key = fresh_key("outage-pooled");
    const auto second_key = fresh_key("outage-pooled");
    const auto first =
        store_->try_grant(first_key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
    const auto second =
        store_->try_grant(second_key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
    ASSERT_TRUE(first.has_value() && second.has_value());
    ASSERT_TRUE(
        store_->delete_if_owner(GrantRef{first_key, "bob", bob.session_id, first->fencing_token}));
    ASSERT_TRUE(store_->delete_if_owner(
        GrantRef{second_key, "bob", bob.session_id, second->fencing_token}));
  }
  store_->heartbeat(alice.session_id);
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  etcd_->kill(0);
  // Two pooled leases (the second meets a keep-alive stream known to be broken, which must be
  // reopened within the call timeout or fail), then a new one.
  for (const auto& target : {key, fresh_key("outage-free"), fresh_key("outage-free")}) {
    const auto started = SteadyClock::now();
    try {
      const auto result =
          store_->try_grant(target, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
      ADD_FAILURE() << "try_grant during an outage returned " << (result ? "a grant" : "held");
    } catch (const UnavailableError& error) {
      std::cout << "outage: try_grant(" << target << ") -> " << to_string(error.code()) << ": "
                << error.what() << "\n";
    }
    // The calls have a 2 s timeout; a call may chain two of them (keep-alive, then Txn).
    EXPECT_LE(SteadyClock::now() - started, milliseconds(4500)) << "not bounded by its timeout";
  }
  EXPECT_THROW(store_->read(key), UnavailableError);
  EXPECT_THROW(store_->extend(handle->ref(), seconds(30)), UnavailableError);
  EXPECT_THROW(store_->heartbeat(alice.session_id), UnavailableError);
  EXPECT_THROW(store_->open_session("carol", seconds(60)), UnavailableError);
  etcd_->start(0);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        try {
          return store_->read(key).has_value();
        } catch (const UnavailableError&) {
          return false;
        }
      },
      seconds(30), milliseconds(50)));
  EXPECT_EQ(store_->read(key)->fencing_token, handle->fencing_token);
  // The keep-alive stream broke with the member and is opened again.
  EXPECT_GT(store_->heartbeat(alice.session_id).expires_at, WallClock::now());
  // The watch stream reconnected and resumed: a release now is reported.
  const int before_release = calls.load();
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, handle->fencing_token}));
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() > before_release; }, seconds(15)));
  const auto next =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, handle->fencing_token);
}

// etcd over TLS with client certificates (--client-cert-auth): the store verifies the server
// against etcd.cacert and presents etcd.cert/etcd.key; a server whose certificate does not
// verify is refused (every call unavailable, never "held").
class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new testing::EtcdCluster(1, /*tls=*/true); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  static BackendPtr make_store(const std::string& cacert) {
    const auto& tls = etcd_->tls();
    return store::etcd::make_etcd_store({etcd_->endpoints(),
                                         milliseconds(2000),
                                         TtlLimits{},
                                         {},
                                         cacert,
                                         tls.client_cert,
                                         tls.client_key});
  }

  static testing::EtcdCluster* etcd_;
};

testing::EtcdCluster* EtcdTlsTest::etcd_ = nullptr;

TEST_F(EtcdTlsTest, StoreWorksOverTls) {
  ASSERT_EQ(etcd_->endpoints().rfind("https://", 0), 0u);
  const auto store = make_store(etcd_->tls().ca);
  const auto session = store->open_session("alice", seconds(60));
  const auto handle = store->try_grant("tls/key", "alice", session.session_id,
                                       GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(handle.has_value());
  EXPECT_EQ(store->read("tls/key")->fencing_token, handle->fencing_token);
  const auto raw = etcd_->raw().get(format_lock_key("tls/key"));
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(static_cast<FencingToken>(raw->mod_revision), handle->fencing_token);
}

TEST_F(EtcdTlsTest, ServerCertificateThatDoesNotVerifyIsRefused) {
  const auto store = make_store(etcd_->tls().other_ca);
  EXPECT_THROW(store->open_session("alice", seconds(60)), UnavailableError);
  EXPECT_THROW(store->read("tls/key"), UnavailableError);
}

TEST_F(EtcdTlsTest, TlsFilesNeedHttpsEndpoints) {
  EXPECT_THROW(store::etcd::make_etcd_store(
                   {"http://127.0.0.1:2379", seconds(1), TtlLimits{}, {}, etcd_->tls().ca, "", ""}),
               InvalidArgumentError);
  EXPECT_THROW(store::etcd::make_etcd_store(
                   {"https://127.0.0.1:1,http://127.0.0.1:2", seconds(1), TtlLimits{}, {}}),
               InvalidArgumentError);
  EXPECT_THROW(
      store::etcd::make_etcd_store(
          {etcd_->endpoints(), seconds(1), TtlLimits{}, {}, "/nonexistent/ca.pem", "", ""}),
      InvalidArgumentError);
}

TEST_F(EtcdStoreTest, EndpointListsBecomeOneChannelTarget) {
  EXPECT_EQ(store::etcd::make_etcd_store(
                {"http://127.0.0.1:1,http://127.0.0.1:2", seconds(1), TtlLimits{}, {}})
                ->backend_id(),
            "etcd");
  EXPECT_THROW(store::etcd::make_etcd_store({"", seconds(1), TtlLimits{}, {}}),
               InvalidArgumentError);
  EXPECT_THROW(store::etcd::make_etcd_store({"http://127.0.0.1", seconds(1), TtlLimits{}, {}}),
               InvalidArgumentError);
}

}  // namespace
}  // namespace dlock
