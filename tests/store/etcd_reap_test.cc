// The etcd store's reaper at scale (docs/adr/0022-etcd-sessions-at-scale.md): a reap pass
// reads one page (kReapPageKeys keys) of the session prefix, the next pass the next page. What
// the conformance matrix cannot see with its few sessions: a dead session's grant past the first
// page is still released, within one walk over the prefix; and a live session whose record and
// index entry fall on two pages keeps its grant. The prefix is filled with lease-less records of
// IDs that sort before every random one ("000…n"), written straight into etcd.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_sessions.h"
#include "support/etcd_server.h"
#include "support/etcd_store_fixture.h"

namespace dlock {
namespace {

using std::chrono::seconds;

class EtcdReapTest : public testing::EtcdStoreFixture {
 protected:
  EtcdReapTest() : EtcdStoreFixture("etcd-reap") {}

  // `count` session records that sort before every random session ID.
  void fill_prefix(int count) {
    for (int n = 1; n <= count; ++n) {
      char id[33];
      std::snprintf(id, sizeof id, "%032x", n);
      etcd_->raw().put(store::etcd::session_record_key(id), "");
    }
  }
};

// Each case runs on an etcd of its own (a fixture per suite), so that only its keys are there.
class EtcdReapPastFirstPageTest : public EtcdReapTest {};
class EtcdReapSplitSessionTest : public EtcdReapTest {};

TEST_F(EtcdReapPastFirstPageTest, DeadSessionsGrantPastTheFirstPageIsReleased) {
  constexpr int kFill = 2 * static_cast<int>(store::etcd::kReapPageKeys) + 100;
  fill_prefix(kFill);
  const auto key = fresh_key("dead");
  const auto alice = store_->open_session("alice", seconds(30));
  ASSERT_TRUE(store_->try_insert(key, "alice", alice.session_id, seconds(60)));
  // The session's end as the reaper sees it: its record is gone, its grant's entry is not.
  etcd_->raw().remove(store::etcd::session_record_key(alice.session_id));

  // One walk over the prefix (its keys / kReapPageKeys passes, rounded up), plus one.
  const int walk = kFill / static_cast<int>(store::etcd::kReapPageKeys) + 2;
  int passes = 0;
  bool reported = false;
  while (passes < walk && store_->read(key)) {
    const auto report = store_->reap_expired();
    ++passes;
    for (const auto& info : report.expired_locks) reported = reported || info.key == key;
  }
  EXPECT_FALSE(store_->read(key)) << "the dead session's grant outlived " << passes
                                  << " reap passes (one walk over the session prefix)";
  EXPECT_TRUE(reported) << "the reaper released the grant without reporting it";
  EXPECT_GT(passes, 1) << "the grant was past the first page, yet the first pass found it";
}

TEST_F(EtcdReapSplitSessionTest, LiveSessionSplitAcrossPagesKeepsItsGrant) {
  // The first page ends with bob's record; his index entry opens the second.
  fill_prefix(static_cast<int>(store::etcd::kReapPageKeys) - 1);
  const auto key = fresh_key("split");
  const auto bob = store_->open_session("bob", seconds(30));
  const auto grant = store_->try_insert(key, "bob", bob.session_id, seconds(60));
  ASSERT_TRUE(grant.has_value());
  for (int pass = 0; pass < 3; ++pass) {
    const auto report = store_->reap_expired();
    EXPECT_TRUE(report.expired_locks.empty()) << "pass " << pass << " reaped a live grant";
  }
  const auto held = store_->read(key);
  ASSERT_TRUE(held.has_value()) << "the reaper released a live session's grant";
  EXPECT_EQ(held->fencing_token, grant->fencing_token);
  EXPECT_EQ(held->session_id, bob.session_id);
}

}  // namespace
}  // namespace dlock
