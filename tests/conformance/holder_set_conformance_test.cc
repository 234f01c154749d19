// The conformance matrix for holder sets (docs/adr/0020-more-primitives-design.md): shared holders
// (the read side of a read-write lock) and permit holders (a counting semaphore) next to the
// exclusive grant. The same fixture and backends as lock_store_conformance_test.cc, which
// instantiates the suite. The races at the end are the cases that catch the READ COMMITTED
// hazards ADR-0020 names: they repeat until they either interleave or prove the bound.
// Over ~500 lines: shared and permit holders are one SPI family (try_grant of a shared or permit
// request), and the two races at the end share one HolderMonitor; split, the halves would repeat
// the helpers.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
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
using dlock::testing::shared_ask;

namespace dlock {
namespace {

using conformance_test::kMinTtl;
using conformance_test::LockStoreConformance;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Ask kShared = shared_ask();
Ask permits(std::uint32_t limit) { return permit_ask(limit); }

std::optional<LockHandle> hold(LockStore& store, const std::string& key, const SessionInfo& session,
                               const Ask& request, LockLease lease = seconds(30)) {
  return store.try_grant(key, session.owner_id, session.session_id, request(lease));
}

bool release(LockStore& store, const LockHandle& handle) {
  return store.delete_if_owner(handle.ref());
}

// --- Read-write locks ---------------------------------------------------------------------------

TEST_P(LockStoreConformance, HolderSharedHoldersCoexistEachWithItsOwnGreaterToken) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto first = hold(*store_, key, alice, kShared);
  const auto second = hold(*store_, key, bob, kShared);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(first->mode, HoldMode::kShared);
  EXPECT_EQ(second->mode, HoldMode::kShared);
  EXPECT_GT(first->fencing_token, 0u);
  EXPECT_GT(second->fencing_token, first->fencing_token);
  EXPECT_GT(first->client_deadline, SteadyClock::now() + seconds(20));

  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[0].fencing_token, first->fencing_token);
  EXPECT_EQ(holders[0].session_id, alice.session_id);
  EXPECT_EQ(holders[0].owner_id, "alice");
  EXPECT_EQ(holders[0].mode, HoldMode::kShared);
  EXPECT_EQ(holders[1].fencing_token, second->fencing_token);
  EXPECT_EQ(holders[1].mode, HoldMode::kShared);
  const auto info = store_->read(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, second->fencing_token);
  EXPECT_EQ(info->mode, HoldMode::kShared);

  const auto listed = store_->list(key, {}, 10);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].fencing_token, first->fencing_token);
  EXPECT_EQ(listed[1].fencing_token, second->fencing_token);
  EXPECT_EQ(store_->list(key, {}, 1).size(), 1u);
  // A reap leaves live holders alone.
  store_->reap_expired();
  EXPECT_EQ(store_->read_holders(key).size(), 2u);
}

TEST_P(LockStoreConformance, HolderExclusiveIsHeldWhileAnySharedHolderLives) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto reader_a = hold(*store_, key, alice, kShared);
  const auto reader_b = hold(*store_, key, bob, kShared);
  ASSERT_TRUE(reader_a && reader_b);
  EXPECT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  // No upgrade: a reader's own exclusive request is held like anyone's.
  EXPECT_FALSE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  ASSERT_TRUE(release(*store_, *reader_a));
  // One reader left: still held.
  EXPECT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  ASSERT_EQ(store_->read_holders(key).size(), 1u);
  ASSERT_TRUE(release(*store_, *reader_b));
  const auto writer =
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(writer.has_value());
  EXPECT_EQ(writer->mode, HoldMode::kExclusive);
  // A writer's token orders it after every reader before it.
  EXPECT_GT(writer->fencing_token, reader_b->fencing_token);
  EXPECT_GT(writer->fencing_token, reader_a->fencing_token);
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].mode, HoldMode::kExclusive);
  EXPECT_EQ(holders[0].fencing_token, writer->fencing_token);
}

TEST_P(LockStoreConformance, HolderSharedIsHeldWhileAnExclusiveHolderLives) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto writer = acquire(key, alice);
  EXPECT_FALSE(hold(*store_, key, bob, kShared).has_value());
  EXPECT_FALSE(hold(*store_, key, bob, permits(3)).has_value());
  // No downgrade either.
  EXPECT_FALSE(hold(*store_, key, alice, kShared).has_value());
  EXPECT_EQ(store_->read(key)->fencing_token, writer.fencing_token);
  ASSERT_TRUE(release(*store_, writer));
  const auto reader = hold(*store_, key, bob, kShared);
  ASSERT_TRUE(reader.has_value());
  EXPECT_GT(reader->fencing_token, writer.fencing_token);
}

TEST_P(LockStoreConformance, HolderExclusiveTakesOverExpiredReadersWithoutAReaper) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto short_reader = hold(*store_, key, alice, kShared, kMinTtl);
  const auto long_reader = hold(*store_, key, bob, kShared, milliseconds(2500));
  ASSERT_TRUE(short_reader && long_reader);
  // The first reader's expiry leaves the second one holding.
  ASSERT_TRUE(
      testing::wait_for([&] { return store_->read_holders(key).size() == 1; }, seconds(10)));
  EXPECT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  wait_until_expired(key);
  const auto writer =
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(writer.has_value());
  EXPECT_GT(writer->fencing_token, long_reader->fencing_token);
}

TEST_P(LockStoreConformance, HolderReacquireBySameSessionReplacesItsHolder) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto first = hold(*store_, key, alice, kShared);
  const auto again = hold(*store_, key, alice, kShared, LockLease::session());
  ASSERT_TRUE(first && again);
  EXPECT_GT(again->fencing_token, first->fencing_token);
  EXPECT_TRUE(again->session_bound);
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, again->fencing_token);
  EXPECT_FALSE(release(*store_, *first));  // the replaced holder is gone
  EXPECT_TRUE(release(*store_, *again));
  EXPECT_FALSE(store_->read(key).has_value());
}

// Extending one holder leaves the others' leases alone. (The extended holder is granted a long TTL
// and extended by as much: etcd renews a lease for the TTL it was granted with, ADR-0011, as the
// exclusive case ExtendAnswersNoMoreThanTheBackendKeeps allows.)
TEST_P(LockStoreConformance, HolderExtendMovesOnlyThatHolderAndKeepsItsToken) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto kept = hold(*store_, key, alice, kShared, seconds(30));
  const auto other = hold(*store_, key, bob, kShared, kMinTtl);
  ASSERT_TRUE(kept && other);
  const auto extended = store_->extend(kept->ref(), seconds(30));
  EXPECT_EQ(extended.fencing_token, kept->fencing_token);
  EXPECT_EQ(extended.mode, HoldMode::kShared);
  EXPECT_GT(extended.client_deadline, SteadyClock::now() + seconds(20));
  // A reference made from the token (as the server makes it) names the same holder.
  const GrantRef by_token{key, "alice", alice.session_id, kept->fencing_token};
  const auto again = store_->extend(by_token, seconds(30));
  EXPECT_EQ(again.fencing_token, kept->fencing_token);
  EXPECT_EQ(again.mode, HoldMode::kShared);
  // The other holder keeps its own lease and runs out.
  ASSERT_TRUE(
      testing::wait_for([&] { return store_->read_holders(key).size() == 1; }, seconds(10)));
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, kept->fencing_token);
  EXPECT_THROW(store_->extend(other->ref(), seconds(30)), LockLostError);
  ASSERT_TRUE(release(*store_, extended));
  EXPECT_THROW(store_->extend(extended.ref(), seconds(30)), LockLostError);
  EXPECT_THROW(store_->extend(by_token, seconds(30)), LockLostError);
}

TEST_P(LockStoreConformance, HolderHandoverOfASharedHolderIsLost) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto reader = hold(*store_, key, alice, kShared);
  ASSERT_TRUE(reader.has_value());
  // Its token names no live exclusive grant: lock lost, and nothing changes (the server then
  // releases it with delete_if_owner).
  EXPECT_THROW(store_->handover(reader->ref(), "bob", bob.session_id, seconds(30)), LockLostError);
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, reader->fencing_token);
  EXPECT_EQ(holders[0].mode, HoldMode::kShared);
}

TEST_P(LockStoreConformance, HolderRevokeRemovesEveryHolder) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto reader_a = hold(*store_, key, alice, kShared);
  const auto reader_b = hold(*store_, key, bob, kShared);
  ASSERT_TRUE(reader_a && reader_b);
  const auto outcome = store_->revoke(key);
  EXPECT_TRUE(outcome.revoked);
  EXPECT_EQ(outcome.fencing_token, reader_b->fencing_token);
  EXPECT_TRUE(store_->read_holders(key).empty());
  EXPECT_THROW(store_->extend(reader_a->ref(), seconds(30)), LockLostError);
  const auto writer =
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(writer.has_value());
  EXPECT_GT(writer->fencing_token, reader_b->fencing_token);
}

TEST_P(LockStoreConformance, HolderCloseSessionReleasesItsHoldersOnly) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto reader_a = hold(*store_, key, alice, kShared);
  const auto reader_b = hold(*store_, key, bob, kShared, LockLease::session());
  ASSERT_TRUE(reader_a && reader_b);
  const auto released = store_->close_session(alice.session_id);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].fencing_token, reader_a->fencing_token);
  EXPECT_EQ(released[0].mode, HoldMode::kShared);
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].session_id, bob.session_id);
  EXPECT_TRUE(holders[0].session_bound);
  store_->close_session(bob.session_id);
  EXPECT_FALSE(store_->read(key).has_value());
}

TEST_P(LockStoreConformance, HolderSessionBoundReaderDiesWithItsSession) {
  const auto key = fresh_key();
  const auto alice = open("alice", kMinTtl);
  const auto bob = open("bob");
  const auto reader = hold(*store_, key, alice, kShared, LockLease::session());
  ASSERT_TRUE(reader.has_value());
  // Heartbeats keep it past the session TTL.
  const auto until = SteadyClock::now() + milliseconds(2000);
  while (SteadyClock::now() < until) {
    store_->heartbeat(alice.session_id);
    EXPECT_FALSE(store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)))
                     .has_value());
    // Real time: the heartbeat period under test.
    std::this_thread::sleep_for(milliseconds(250));
  }
  wait_until_expired(key);
  const auto writer =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(30)));
  ASSERT_TRUE(writer.has_value());
  EXPECT_GT(writer->fencing_token, reader->fencing_token);
}

TEST_P(LockStoreConformance, HolderReapRemovesExpiredHoldersAndReportsThem) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto expiring = hold(*store_, key, alice, kShared, kMinTtl);
  const auto staying = hold(*store_, key, bob, kShared, seconds(30));
  ASSERT_TRUE(expiring && staying);
  ASSERT_TRUE(
      testing::wait_for([&] { return store_->read_holders(key).size() == 1; }, seconds(10)));
  const auto report = store_->reap_expired();
  for (const auto& info : report.expired_locks) {
    EXPECT_NE(info.fencing_token, staying->fencing_token) << "a live holder was reaped";
  }
  ASSERT_EQ(store_->read_holders(key).size(), 1u);
  EXPECT_EQ(store_->read_holders(key)[0].fencing_token, staying->fencing_token);
}

TEST_P(LockStoreConformance, HolderWatchReleasesReportsAReaderLeaving) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto reader = hold(*store_, key, alice, kShared);
  ASSERT_TRUE(reader.has_value());
  std::atomic<int> calls{0};
  auto subscription = store_->watch_releases(key, [&](FencingToken) { ++calls; });
  ASSERT_TRUE(release(*store_, *reader));
  EXPECT_TRUE(testing::wait_for([&] { return calls.load() >= 1; }, seconds(10)))
      << "a shared holder's release was not reported";
}

TEST_P(LockStoreConformance, HolderInvalidRequestsNameTheField) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto field_of = [&](const Ask& request) -> std::string {
    try {
      hold(*store_, key, alice, request);
    } catch (const InvalidArgumentError& error) {
      return error.field();
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of(permits(0)), "limit");
  EXPECT_EQ(field_of(permits(100000)), "limit");
  EXPECT_THROW(hold(*store_, key, alice, kShared, milliseconds(1)), InvalidArgumentError);
  store_->close_session(alice.session_id);
  EXPECT_THROW(hold(*store_, key, alice, kShared), SessionNotFoundError);
  EXPECT_TRUE(store_->read_holders(key).empty());
}

// --- Semaphores ---------------------------------------------------------------------------------

TEST_P(LockStoreConformance, HolderPermitsAreGrantedUpToTheLimit) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto a = hold(*store_, key, alice, permits(2));
  const auto b = hold(*store_, key, bob, permits(2));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->mode, HoldMode::kPermit);
  EXPECT_GT(b->fencing_token, a->fencing_token);
  EXPECT_FALSE(hold(*store_, key, carol, permits(2)).has_value());
  // Re-acquiring replaces the session's own permit: never a second one.
  const auto a_again = hold(*store_, key, alice, permits(2));
  ASSERT_TRUE(a_again.has_value());
  EXPECT_GT(a_again->fencing_token, b->fencing_token);
  EXPECT_FALSE(hold(*store_, key, carol, permits(2)).has_value());
  const auto holders = store_->read_holders(key);
  ASSERT_EQ(holders.size(), 2u);
  for (const auto& holder : holders) {
    EXPECT_EQ(holder.mode, HoldMode::kPermit);
    EXPECT_EQ(holder.limit, 2u);
  }
  // Permits exclude the other modes.
  EXPECT_FALSE(hold(*store_, key, carol, kShared).has_value());
  EXPECT_FALSE(
      store_->try_grant(key, "carol", carol.session_id, GrantRequest::exclusive(seconds(30)))
          .has_value());
  ASSERT_TRUE(release(*store_, *b));
  const auto c = hold(*store_, key, carol, permits(2));
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->fencing_token, a_again->fencing_token);
}

TEST_P(LockStoreConformance, HolderPermitLimitDisagreeingWithLiveHoldersIsConflict) {
  const auto key = fresh_key();
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto a = hold(*store_, key, alice, permits(2));
  ASSERT_TRUE(a.has_value());
  try {
    hold(*store_, key, bob, permits(3));
    FAIL() << "a permit of another limit was granted";
  } catch (const ConflictError& error) {
    EXPECT_EQ(error.field(), "limit");
  }
  EXPECT_EQ(store_->read_holders(key).size(), 1u);
  ASSERT_TRUE(release(*store_, *a));
  // With no live holder left, the name takes the new limit.
  const auto b = hold(*store_, key, bob, permits(3));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(store_->read_holders(key)[0].limit, 3u);
}

TEST_P(LockStoreConformance, HolderPermitOfADeadSessionIsFreed) {
  const auto key = fresh_key();
  const auto alice = open("alice", kMinTtl);
  const auto bob = open("bob");
  const auto carol = open("carol");
  const auto bound = hold(*store_, key, alice, permits(1), LockLease::session());
  ASSERT_TRUE(bound.has_value());
  EXPECT_FALSE(hold(*store_, key, bob, permits(1)).has_value());
  // No heartbeat: the session and its session-bound permit end, without a reaper.
  wait_until_expired(key);
  const auto b = hold(*store_, key, bob, permits(1));
  ASSERT_TRUE(b.has_value());
  EXPECT_GT(b->fencing_token, bound->fencing_token);
  // A TTL permit is freed by closing its session.
  store_->close_session(bob.session_id);
  const auto c = hold(*store_, key, carol, permits(1));
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->fencing_token, b->fencing_token);
}

// --- Races: the bounds hold under concurrency ---------------------------------------------------

// In-process model of who holds the key right now: each holder enters after its grant returned
// and leaves before it releases, so its interval lies inside the backend's grant. Two intervals
// that must exclude each other and overlap here overlapped in the backend too.
class HolderMonitor {
 public:
  explicit HolderMonitor(std::uint32_t permit_limit) : permit_limit_(permit_limit) {}

  void enter(const LockHandle& handle) {
    std::lock_guard lock(mutex_);
    switch (handle.mode) {
      case HoldMode::kExclusive:
        if (readers_ != 0 || writers_ != 0 || permits_ != 0) {
          violations_.push_back("writer " + std::to_string(handle.fencing_token) + " beside " +
                                std::to_string(readers_) + " readers, " + std::to_string(writers_) +
                                " writers");
        }
        if (handle.fencing_token <= max_token_) {
          violations_.push_back("writer token " + std::to_string(handle.fencing_token) +
                                " not above an earlier holder's " + std::to_string(max_token_));
        }
        ++writers_;
        last_writer_token_ = handle.fencing_token;
        break;
      case HoldMode::kShared:
        if (writers_ != 0) violations_.push_back("reader beside a writer");
        if (handle.fencing_token <= last_writer_token_) {
          violations_.push_back("reader token not above the writer before it");
        }
        ++readers_;
        break;
      case HoldMode::kPermit:
        if (++permits_ > permit_limit_) {
          violations_.push_back(std::to_string(permits_) + " permits of " +
                                std::to_string(permit_limit_) + " held at once");
        }
        break;
    }
    max_token_ = std::max(max_token_, handle.fencing_token);
    ++grants_[static_cast<int>(handle.mode)];
  }

  void leave(const LockHandle& handle) {
    std::lock_guard lock(mutex_);
    if (handle.mode == HoldMode::kExclusive) --writers_;
    if (handle.mode == HoldMode::kShared) --readers_;
    if (handle.mode == HoldMode::kPermit) --permits_;
  }

  std::vector<std::string> violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }
  int grants(HoldMode mode) const {
    std::lock_guard lock(mutex_);
    return grants_[static_cast<int>(mode)];
  }

 private:
  const std::uint32_t permit_limit_;
  mutable std::mutex mutex_;
  std::uint32_t readers_ = 0, writers_ = 0, permits_ = 0;
  FencingToken max_token_ = 0, last_writer_token_ = 0;
  int grants_[3] = {0, 0, 0};
  std::vector<std::string> violations_;
};

// `threads` sessions take turns on one key for `rounds` rounds each; `mode_of(thread, round)`
// picks the mode. Each grant is held for a moment, then released (which must succeed).
// For backends with shared storage the threads use three stores (three dlockd) on it.
void race(testing::BackendHarness& harness, BackendPtr& store, const TtlLimits& limits,
          const std::string& key, HolderMonitor& monitor, std::uint32_t permit_limit,
          const std::function<HoldMode(int, int)>& mode_of) {
  constexpr int kThreads = 6;
  constexpr int kRounds = 20;
  std::vector<BackendPtr> extra;
  std::vector<LockStore*> stores{store.get()};
  if (store->backend_id() != "sqlite") {
    for (int i = 0; i < 2; ++i)
      stores.push_back(extra.emplace_back(harness.make_backend(limits)).get());
  }
  std::vector<SessionInfo> sessions;
  for (int i = 0; i < kThreads; ++i) {
    sessions.push_back(store->open_session("racer-" + std::to_string(i), seconds(60)));
  }
  std::barrier start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto& mine = *stores[i % stores.size()];
      const auto& session = sessions[i];
      start.arrive_and_wait();
      for (int round = 0; round < kRounds; ++round) {
        const auto mode = mode_of(i, round);
        // A round retries (briefly) until granted, so writers among many readers get grants too.
        std::optional<LockHandle> handle;
        const auto give_up = SteadyClock::now() + milliseconds(500);
        while (!handle && SteadyClock::now() < give_up) {
          if (mode == HoldMode::kExclusive) {
            handle = mine.try_grant(key, session.owner_id, session.session_id,
                                    GrantRequest::exclusive(seconds(30)));
          } else {
            handle = hold(mine, key, session,
                          mode == HoldMode::kPermit ? permits(permit_limit) : kShared);
          }
          if (!handle) std::this_thread::sleep_for(milliseconds(1));  // a retry pause
        }
        if (!handle) continue;
        monitor.enter(*handle);
        // Real time: a hold of a few ms, so holders overlap.
        std::this_thread::sleep_for(milliseconds(3));
        monitor.leave(*handle);
        if (!release(mine, *handle)) ++failures;
        std::this_thread::sleep_for(milliseconds(2));  // leave others a window
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "a live grant could not be released";
}

TEST_P(LockStoreConformance, HolderRaceNeverGrantsAWriterBesideALiveReader) {
  const auto key = fresh_key();
  HolderMonitor monitor(0);
  // Mostly readers, so a writer often races a reader's arrival or departure.
  race(*harness_, store_, limits_, key, monitor, 0, [](int thread, int round) {
    return (thread + round) % 3 == 0 ? HoldMode::kExclusive : HoldMode::kShared;
  });
  for (const auto& violation : monitor.violations()) ADD_FAILURE() << violation;
  EXPECT_GT(monitor.grants(HoldMode::kShared), 0);
  EXPECT_GT(monitor.grants(HoldMode::kExclusive), 0);
  EXPECT_TRUE(store_->read_holders(key).empty()) << "every holder released";
}

TEST_P(LockStoreConformance, HolderRaceNeverGrantsMorePermitsThanTheLimit) {
  const auto key = fresh_key();
  constexpr std::uint32_t kLimit = 2;
  HolderMonitor monitor(kLimit);
  race(*harness_, store_, limits_, key, monitor, kLimit,
       [](int, int) { return HoldMode::kPermit; });
  for (const auto& violation : monitor.violations()) ADD_FAILURE() << violation;
  EXPECT_GT(monitor.grants(HoldMode::kPermit), 0);
  EXPECT_TRUE(store_->read_holders(key).empty()) << "every permit released";
}

}  // namespace
}  // namespace dlock
