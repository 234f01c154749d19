// Holder sets on etcd (docs/adr/0020-more-primitives-design.md) against a real single-member
// etcd: what the conformance matrix cannot see from the SPI alone — the holder key space shared
// with no other name, the session-bound exclusive Txn's holder compare, one permit per session
// under concurrency, and a holder's lease expiry reported by watch_releases.

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#include "support/etcd_store_fixture.h"
#include "support/grant_asks.h"
#include "support/subprocess.h"

using dlock::testing::Ask;
using dlock::testing::permit_ask;
using dlock::testing::shared_ask;

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const Ask kShared = shared_ask();

class EtcdHoldersTest : public testing::EtcdStoreFixture {
 protected:
  EtcdHoldersTest() : EtcdStoreFixture("etcd-holders") {}

  std::optional<LockHandle> hold(const std::string& key, const SessionInfo& session,
                                 const Ask& request, LockLease lease = seconds(30)) {
    return store_->try_grant(key, session.owner_id, session.session_id, request(lease));
  }
};

// The session-bound exclusive acquire is a Txn of its own (etcd_session_bound.cc): it carries
// the holder-range compare too.
TEST_F(EtcdHoldersTest, SessionBoundExclusiveIsHeldWhileASharedHolderLives) {
  const auto key = fresh_key("bound");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto bob = store_->open_session("bob", seconds(30));
  const auto reader = hold(key, alice, kShared);
  ASSERT_TRUE(reader.has_value());
  EXPECT_FALSE(
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(LockLease::session()))
          .has_value());
  ASSERT_EQ(store_->read_holders(key).size(), 1u);
  ASSERT_TRUE(
      store_->delete_if_owner(GrantRef{key, "alice", alice.session_id, reader->fencing_token}));
  const auto writer =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(LockLease::session()));
  ASSERT_TRUE(writer.has_value());
  EXPECT_GT(writer->fencing_token, reader->fencing_token);
}

// A store key may hold '/' and '\0'. Names that extend a held name with what its holder keys
// look like (a '/s/...' suffix, or a '\0' and a holder suffix) are other names: their grants
// neither count as the held name's holders nor are held by them.
TEST_F(EtcdHoldersTest, HolderKeysCollideWithNoOtherName) {
  const auto key = fresh_key("space");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto bob = store_->open_session("bob", seconds(30));
  const auto reader = hold(key, alice, kShared);
  ASSERT_TRUE(reader.has_value());
  const std::vector<std::string> others{
      key + "/s/" + bob.session_id, key + std::string(1, '\0') + "hs" + bob.session_id,
      key + std::string(1, '\0') + "hp00020000", key + std::string(1, '\0')};
  for (const auto& other : others) {
    SCOPED_TRACE(::testing::PrintToString(other));
    const auto shared = hold(other, bob, kShared);
    ASSERT_TRUE(shared.has_value()) << "another name was held by the holders of " << key;
    ASSERT_EQ(store_->read_holders(key).size(), 1u) << "another name's holder counted";
    ASSERT_EQ(store_->read_holders(other).size(), 1u);
    EXPECT_EQ(store_->read_holders(other)[0].key, other);
    // A permit of 2 under the held name stays held (shared holders live), whatever else exists.
    EXPECT_FALSE(hold(key, bob, permit_ask(2)).has_value());
    ASSERT_TRUE(
        store_->delete_if_owner(GrantRef{other, "bob", bob.session_id, shared->fencing_token}));
    const auto lock =
        store_->try_grant(other, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
    ASSERT_TRUE(lock.has_value());
    ASSERT_TRUE(
        store_->delete_if_owner(GrantRef{other, "bob", bob.session_id, lock->fencing_token}));
  }
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, reader->fencing_token);
}

// A session holds at most one holder of a name: concurrent permit requests of one session end
// with one permit, never two of the limit's slots.
TEST_F(EtcdHoldersTest, ConcurrentPermitRequestsOfOneSessionTakeOneSlot) {
  constexpr int kThreads = 4;
  const auto alice = store_->open_session("alice", seconds(60));
  for (int round = 0; round < 20; ++round) {
    const auto key = fresh_key("one-slot");
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&] {
        start.arrive_and_wait();
        try {
          hold(key, alice, permit_ask(8));
        } catch (const ContentionError&) {
          // Lost every race to the session's own other requests: allowed.
        }
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_EQ(store_->read_holders(key).size(), 1u) << "round " << round;
  }
}

// A holder's lease expiry (no release call) wakes watch_releases.
TEST_F(EtcdHoldersTest, WatchReleasesReportsAHolderExpiring) {
  const auto key = fresh_key("expiry");
  const auto alice = store_->open_session("alice", seconds(30));
  const auto permit = hold(key, alice, permit_ask(3), seconds(1));
  ASSERT_TRUE(permit.has_value());
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  // The watch may wake its waiter once as it starts (a spurious call); the expiry comes later.
  // A window for the watch's spurious first wake-up, which has no other sign.
  std::this_thread::sleep_for(milliseconds(300));
  const int at_start = calls.load();
  ASSERT_EQ(store_->read_holders(key).size(), 1u) << "the permit expired too early to tell";
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() > at_start; }, seconds(10)))
      << "a permit's expiry was not reported";
  EXPECT_TRUE(store_->read_holders(key).empty());
}

}  // namespace
}  // namespace dlock
