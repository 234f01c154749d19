// The etcd store's reaper at scale (docs/adr/0022-etcd-sessions-at-scale.md): a reap pass
// reads one page (kReapPageKeys keys) of the session prefix, the next pass the next page. What
// the conformance matrix cannot see with its few sessions: a dead session's grant past the first
// page is still released, within one walk over the prefix; and a live session whose record and
// index entry fall on two pages keeps its grant. The prefix is filled with lease-less records of
// IDs that sort before every random one ("000…n"), written straight into etcd.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_sessions.h"
#include "support/etcd_server.h"
#include "support/etcd_store_fixture.h"
#include "util/ids.h"

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
class EtcdReapSlicesTest : public EtcdReapTest {};

TEST_F(EtcdReapPastFirstPageTest, DeadSessionsGrantPastTheFirstPageIsReleased) {
  constexpr int kFill = 2 * static_cast<int>(store::etcd::kReapPageKeys) + 100;
  fill_prefix(kFill);
  const auto key = fresh_key("dead");
  const auto alice = store_->open_session("alice", seconds(30));
  ASSERT_TRUE(
      store_->try_grant(key, "alice", alice.session_id, GrantRequest::exclusive(seconds(60))));
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
  const auto grant =
      store_->try_grant(key, "bob", bob.session_id, GrantRequest::exclusive(seconds(60)));
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

// etcd 3.4 walks a Range's whole span for the count it answers, so a page read up to the end of
// the prefix costs etcd all the keys after it. After its first walk the cursor reads slices of
// about a page: every key is still read exactly once per walk, and no page's span (the count
// etcd answers with) holds more than a few pages of keys.
TEST_F(EtcdReapSlicesTest, AWalkReadsEveryKeyOnceInSlicesOfAboutAPage) {
  constexpr std::int64_t kPage = 20;
  const std::string prefix = "/dlock-test/slices/";
  std::multiset<std::string> all;
  for (int n = 0; n < 600; ++n) all.insert(prefix + util::random_id());
  all.insert(prefix + "~not-hex");  // sorts after every hex key: the last slice has it
  all.insert(prefix + "-not-hex");  // sorts before every hex key: the first slice has it
  for (const auto& key : all) etcd_->raw().put(key, "");
  store::etcd::EtcdClient client(store::etcd::make_channel(etcd_->endpoints()),
                                 std::chrono::milliseconds(5000));
  store::etcd::PrefixCursor cursor(prefix, kPage);
  struct Walk {
    std::multiset<std::string> keys;
    std::int64_t widest = 0;  // the largest span (count) of one page
    int pages = 0;
  };
  auto walk = [&] {
    Walk done;
    const auto walks = cursor.walks();
    while (cursor.walks() == walks && done.pages < 10000) {
      const auto page = cursor.next(client);
      ++done.pages;
      done.widest = std::max(done.widest, page.count());
      for (const auto& kv : page.kvs()) done.keys.insert(kv.key());
    }
    return done;
  };
  const Walk first = walk();
  EXPECT_EQ(first.keys, all);
  EXPECT_EQ(first.widest, static_cast<std::int64_t>(all.size()))
      << "the first walk's first page spans the whole prefix";
  const Walk second = walk();
  EXPECT_EQ(second.keys, all) << "a key was missed or read twice";
  EXPECT_LT(second.widest, 3 * kPage) << "a page's span held " << second.widest << " keys";
  EXPECT_LT(second.pages, 3 * static_cast<int>(all.size()) / static_cast<int>(kPage))
      << "the walk took " << second.pages << " pages";
}

// A measurement, not a check (docs/adr/0022, "Slices"): etcd's CPU per page of the reaper's
// walk over 100 000 keys, unsliced (the first walk) and sliced (the second). Run it with
//   build/tests/etcd_reap_test --gtest_also_run_disabled_tests --gtest_filter='*Measure*'
TEST_F(EtcdReapSlicesTest, DISABLED_MeasureEtcdCpuPerPageOfAWalk) {
  constexpr int kKeys = 100000;
  const std::string prefix = "/dlock-test/measure/";
  std::vector<std::thread> writers;
  for (int t = 0; t < 16; ++t) {
    writers.emplace_back([&, t] {
      testing::EtcdRawClient raw(etcd_->endpoints());
      for (int n = t; n < kKeys; n += 16) raw.put(prefix + util::random_id(), "");
    });
  }
  for (auto& writer : writers) writer.join();
  store::etcd::EtcdClient client(store::etcd::make_channel(etcd_->endpoints()),
                                 std::chrono::milliseconds(20000));
  store::etcd::PrefixCursor cursor(prefix, store::etcd::kReapPageKeys);
  for (int w = 0; w < 2; ++w) {
    const auto walks = cursor.walks();
    const double cpu0 = testing::cpu_seconds(etcd_->pid(0));
    int pages = 0;
    while (cursor.walks() == walks) {
      cursor.next(client);
      ++pages;
    }
    const double cpu = testing::cpu_seconds(etcd_->pid(0)) - cpu0;
    std::printf("walk %d (%s): %d pages, etcd CPU %.2f s, %.1f ms per page\n", w + 1,
                w == 0 ? "one slice" : "sliced", pages, cpu, 1000.0 * cpu / pages);
  }
}

}  // namespace
}  // namespace dlock
