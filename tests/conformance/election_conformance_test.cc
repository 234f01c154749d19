// The conformance matrix for elections (docs/adr/0020-more-primitives-design.md, "Leader
// election"): an election's leader is an exclusive grant with a value (a leader GrantRequest),
// whose value proclaim replaces under the same token. The same fixture and backends as
// lock_store_conformance_test.cc, which instantiates the suite.
//
// The subtle points each have a case: a proclaim keeps the token *and the lease* (etcd: a Put
// without the grant's lease would make the key outlive its session — ProclaimedLeaderStillExpires);
// a plain lock that takes a leader's name over, or a handover, drops the value; a resigned or
// superseded leader can neither proclaim nor resign again; observers are told about a new leader
// and a new value through watch_releases, also across stores on shared storage.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "conformance/conformance_fixture.h"
#include "dlock/lock_store.h"
#include "support/subprocess.h"
#include "util/limits.h"

namespace dlock {
namespace {

using conformance_test::kMinTtl;
using conformance_test::LockStoreConformance;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::optional<LockHandle> campaign(LockStore& store, const std::string& key,
                                   const SessionInfo& session, const std::string& value,
                                   LockLease lease = seconds(30)) {
  return store.try_grant(key, session.owner_id, session.session_id,
                         GrantRequest::leader(value, lease));
}

bool resign(LockStore& store, const LockHandle& handle) {
  return store.delete_if_owner(handle.ref());
}

TEST_P(LockStoreConformance, ElectionLeaderCarriesItsValue) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto leader = campaign(*store_, key, alice, "10.0.0.1:8080");
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(leader->mode, HoldMode::kExclusive);
  EXPECT_GT(leader->fencing_token, 0u);
  EXPECT_GT(leader->client_deadline, SteadyClock::now() + seconds(20));

  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, leader->fencing_token);
  EXPECT_EQ(info->owner_id, "alice");
  EXPECT_EQ(info->session_id, alice.session_id);
  EXPECT_EQ(info->mode, HoldMode::kExclusive);
  ASSERT_TRUE(info->value.has_value());
  EXPECT_EQ(*info->value, "10.0.0.1:8080");

  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].value, std::optional<std::string>("10.0.0.1:8080"));
  const auto listed = store_->list(key, {}, 10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].value, std::optional<std::string>("10.0.0.1:8080"));
}

TEST_P(LockStoreConformance, ElectionPlainLockHasNoValue) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  acquire(key, alice);
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->value.has_value()) << *info->value;
}

TEST_P(LockStoreConformance, ElectionOneLeaderAtATimeAndLocksShareTheName) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto leader = campaign(*store_, key, alice, "a");
  ASSERT_TRUE(leader.has_value());
  EXPECT_FALSE(campaign(*store_, key, bob, "b").has_value()) << "two leaders at once";
  EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                   .has_value());
  EXPECT_FALSE(
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::shared(seconds(30))).has_value());
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("a"));

  // The other way round: a plain lock (and a shared holder) keeps a campaigner out.
  const auto locked = fresh_key("locked");
  acquire(locked, bob);
  EXPECT_FALSE(campaign(*store_, locked, alice, "a").has_value());
  const auto read_locked = fresh_key("shared");
  ASSERT_TRUE(
      store_->try_grant(read_locked, "bob", bob.session_id, GrantRequest::shared(seconds(30)))
          .has_value());
  EXPECT_FALSE(campaign(*store_, read_locked, alice, "a").has_value());
}

TEST_P(LockStoreConformance, ElectionProclaimKeepsTheTokenAndChangesTheValue) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto leader = campaign(*store_, key, alice, "first");
  ASSERT_TRUE(leader.has_value());
  const auto before = store_->read(key);
  ASSERT_TRUE(before.has_value());

  const auto proclaimed = store_->proclaim(leader->ref(), "second");
  EXPECT_EQ(proclaimed.fencing_token, leader->fencing_token);
  EXPECT_EQ(proclaimed.value, std::optional<std::string>("second"));
  EXPECT_EQ(proclaimed.owner_id, "alice");
  EXPECT_EQ(proclaimed.session_id, alice.session_id);
  const auto after = store_->read(key);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->fencing_token, leader->fencing_token);
  EXPECT_EQ(after->value, std::optional<std::string>("second"));
  // The lease is the grant's, not a new one: the expiry has not moved forward by a new TTL.
  EXPECT_LE(after->expires_at, before->expires_at + seconds(2));

  store_->proclaim(leader->ref(), "third");
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("third"));
  // Extending a leader keeps its value.
  store_->extend(leader->ref(), seconds(40));
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("third"));
  // The next grant of the name (after the resignation) is greater than the proclaimed one's.
  ASSERT_TRUE(resign(*store_, *leader));
  const auto next = campaign(*store_, key, open("bob"), "bob");
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
}

// etcd: proclaim must keep the key on the grant's lease (a Put without it would detach the key
// from every lease and the leader would never expire). Every backend: the proclaimed grant still
// expires at its TTL, and the name can then be won by another session with a greater token.
TEST_P(LockStoreConformance, ElectionProclaimedLeaderStillExpires) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto leader = campaign(*store_, key, alice, "first", kMinTtl);
  ASSERT_TRUE(leader.has_value());
  store_->proclaim(leader->ref(), "second");
  wait_until_expired(key);
  const auto bob = open("bob");
  const auto next = campaign(*store_, key, bob, "bob");
  ASSERT_TRUE(next.has_value()) << "the proclaimed leader outlived its TTL";
  EXPECT_GT(next->fencing_token, leader->fencing_token);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("bob"));
  EXPECT_THROW(store_->proclaim(leader->ref(), "stale"), LockLostError);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("bob"));
}

TEST_P(LockStoreConformance, ElectionSessionBoundLeaderProclaimsAndEndsWithItsSession) {
  const auto key = fresh_key();
  const auto alice = open("alice", kMinTtl);
  const auto leader = campaign(*store_, key, alice, "first", LockLease::session());
  ASSERT_TRUE(leader.has_value());
  EXPECT_TRUE(leader->session_bound);
  const auto proclaimed = store_->proclaim(leader->ref(), "second");
  EXPECT_TRUE(proclaimed.session_bound);
  EXPECT_EQ(proclaimed.fencing_token, leader->fencing_token);
  store_->heartbeat(alice.session_id);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("second"));
  wait_until_expired(key);  // no more heartbeats: the session, and the leader, end
  const auto bob = open("bob");
  const auto next = campaign(*store_, key, bob, "bob");
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
}

// The mutation row election-resign-keeps-token: a resigned leader's token must never name the
// name's grant again — neither for a proclaim nor for a second resignation — and the next leader
// has a greater token.
TEST_P(LockStoreConformance, ElectionResignedLeaderIsDoneAndTheNextHasAGreaterToken) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto first = campaign(*store_, key, alice, "alice");
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(resign(*store_, *first));
  EXPECT_FALSE(store_->read(key).has_value()) << "a resigned leader still leads";
  EXPECT_THROW(store_->proclaim(first->ref(), "again"), LockLostError);
  EXPECT_FALSE(store_->read(key).has_value()) << "a resigned leader's proclaim revived it";
  EXPECT_FALSE(resign(*store_, *first));

  const auto second = campaign(*store_, key, bob, "bob");
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->fencing_token, first->fencing_token);
  EXPECT_THROW(store_->proclaim(first->ref(), "stale"), LockLostError);
  EXPECT_FALSE(resign(*store_, *first));
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, second->fencing_token);
  EXPECT_EQ(info->value, std::optional<std::string>("bob"));
}

TEST_P(LockStoreConformance, ElectionRecampaignBySameSessionMintsAGreaterTokenAndItsValue) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto first = campaign(*store_, key, alice, "one");
  ASSERT_TRUE(first.has_value());
  const auto again = campaign(*store_, key, alice, "two");
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(again->fencing_token, first->fencing_token);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("two"));
  EXPECT_THROW(store_->proclaim(first->ref(), "stale"), LockLostError);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("two"));
}

// A plain grant of the name never inherits a leader's value: a re-acquire by the leader's own
// session, a takeover after expiry, a handover.
TEST_P(LockStoreConformance, ElectionPlainGrantsDropTheValue) {
  const auto alice = open("alice");
  const auto bob = open("bob");

  const auto reentrant = fresh_key("reentrant");
  ASSERT_TRUE(campaign(*store_, reentrant, alice, "leader").has_value());
  acquire(reentrant, alice);
  EXPECT_FALSE(store_->read(reentrant)->value.has_value()) << "a re-acquire kept the value";

  const auto expired = fresh_key("expired");
  ASSERT_TRUE(campaign(*store_, expired, alice, "leader", kMinTtl).has_value());
  wait_until_expired(expired);
  acquire(expired, bob);
  EXPECT_FALSE(store_->read(expired)->value.has_value()) << "a takeover kept the value";

  const auto handed = fresh_key("handed");
  const auto leader = campaign(*store_, handed, alice, "leader");
  ASSERT_TRUE(leader.has_value());
  const auto next = store_->handover(leader->ref(), "bob", bob.session_id, seconds(30));
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
  const auto info = store_->read(handed);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->session_id, bob.session_id);
  EXPECT_FALSE(info->value.has_value()) << "a handover kept the value";
}

// A proclaim names a live exclusive grant: not a shared holder's token, not another session's.
TEST_P(LockStoreConformance, ElectionProclaimNeedsTheLiveExclusiveGrant) {
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto shared_key = fresh_key("shared");
  const auto reader =
      store_->try_grant(shared_key, "alice", alice.session_id, GrantRequest::shared(seconds(30)));
  ASSERT_TRUE(reader.has_value());
  EXPECT_THROW(store_->proclaim(reader->ref(), "x"), LockLostError);  // a shared holder's token
  EXPECT_FALSE(store_->read_holders(shared_key)[0].value.has_value());

  const auto key = fresh_key();
  const auto leader = campaign(*store_, key, alice, "alice");
  ASSERT_TRUE(leader.has_value());
  auto forged = *leader;
  forged.session_id = bob.session_id;
  forged.owner_id = "bob";
  EXPECT_THROW(store_->proclaim(forged.ref(), "bob"), LockLostError);
  auto wrong_token = *leader;
  wrong_token.fencing_token += 1000;
  EXPECT_THROW(store_->proclaim(wrong_token.ref(), "bob"), LockLostError);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("alice"));

  // A proclaim on a plain lock gives it a value (an election is a lock with a value).
  const auto plain = fresh_key("plain");
  const auto lock = acquire(plain, alice);
  EXPECT_EQ(store_->proclaim(lock.ref(), "now a leader").fencing_token, lock.fencing_token);
  EXPECT_EQ(store_->read(plain)->value, std::optional<std::string>("now a leader"));
}

TEST_P(LockStoreConformance, ElectionClosingTheLeadersSessionEndsItsLeadership) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto leader = campaign(*store_, key, alice, "alice");
  ASSERT_TRUE(leader.has_value());
  const auto released = store_->close_session(alice.session_id);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].fencing_token, leader->fencing_token);
  EXPECT_FALSE(store_->read(key).has_value());
  const auto bob = open("bob");
  const auto next = campaign(*store_, key, bob, "bob");
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->fencing_token, leader->fencing_token);
  // revoke ends a leadership too.
  EXPECT_TRUE(store_->revoke(key).revoked);
  EXPECT_FALSE(store_->read(key).has_value());
}

TEST_P(LockStoreConformance, ElectionInvalidValuesNameTheField) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto field_of = [&](const std::string& value) -> std::string {
    try {
      campaign(*store_, key, alice, value);
    } catch (const InvalidArgumentError& error) {
      return error.field();
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of(""), "value");
  EXPECT_EQ(field_of(std::string(limits::kMaxLeaderValueBytes + 1, 'v')), "value");
  EXPECT_EQ(field_of(std::string("a\0b", 3)), "value");
  EXPECT_FALSE(store_->read(key).has_value()) << "a refused campaign left a grant";

  const auto longest = std::string(limits::kMaxLeaderValueBytes, 'v');
  const auto leader = campaign(*store_, key, alice, longest);
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>(longest));
  EXPECT_THROW(store_->proclaim(leader->ref(), ""), InvalidArgumentError);
  // Text of any kind survives the round trip (JSON-ish, quotes, UTF-8).
  const std::string text = "{\"addr\":\"10.0.0.1\",\"zone\":\"\xc3\xa9t\xc3\xa9\"}\n\t";
  store_->proclaim(leader->ref(), text);
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>(text));
}

TEST_P(LockStoreConformance, ElectionWatchReportsANewLeaderAndANewValue) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  const auto leader = campaign(*store_, key, alice, "first");
  ASSERT_TRUE(leader.has_value());
  ASSERT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
      << "a new leader was not reported";
  const int seen = calls.load();
  store_->proclaim(leader->ref(), "second");
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() > seen; }, seconds(10)))
      << "a new value was not reported";
}

TEST_P(LockStoreConformance, ElectionWatchSeesALeaderMadeThroughAnotherStore) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "the embedded store serves one dlockd; it has no other store to hear from";
  }
  const auto key = fresh_key();
  auto other = harness_->make_backend(limits_);
  const auto alice = other->open_session("alice", seconds(60));
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  const auto leader =
      other->try_grant(key, "alice", alice.session_id, GrantRequest::leader("a", seconds(30)));
  ASSERT_TRUE(leader.has_value());
  ASSERT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
      << "a leader elected through another store was not reported";
  const int seen = calls.load();
  other->proclaim(leader->ref(), "b");
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() > seen; }, seconds(10)))
      << "a proclaim through another store was not reported";
  EXPECT_EQ(store_->read(key)->value, std::optional<std::string>("b"));
}

}  // namespace
}  // namespace dlock
