// Batched etcd writes (docs/adr/0023-etcd-batched-txns.md; src/store/etcd/etcd_txn_batch.h):
// which Txns may share a batch, and, against a real single-member etcd, that each Txn of a batch
// keeps its own outcome. The hazard the grouping rule exists for is shown first hand: etcd
// evaluates every nested Txn's compares on one snapshot, so a shared grant and an exclusive
// grant of one name put in one batch would both be granted.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/errors.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_sessions.h"
#include "store/etcd/etcd_txn_batch.h"
#include "support/etcd_server.h"

namespace dlock {
namespace {

using store::etcd::BatchedTxn;
using store::etcd::CallKind;
using store::etcd::TxnBatcher;
using store::etcd::TxnFootprint;
namespace etcd = store::etcd;
using Request = etcdserverpb::TxnRequest;

// If(key absent) Then(Put key).
Request create(const std::string& key, std::int64_t lease = 0) {
  Request r;
  *r.add_compare() = etcd::compare_create_revision(key, 0);
  *r.add_success() = etcd::put_op(key, "v", lease);
  *r.add_failure() = etcd::get_op(key);
  return r;
}

// The shape of a shared grant of `name`: If(lock key absent) Then(Put a holder key).
Request shared_grant(const std::string& name, const std::string& holder) {
  Request r;
  *r.add_compare() = etcd::compare_create_revision(name + "/lock", 0);
  *r.add_success() = etcd::put_op(name + "/holders/" + holder, "h", 0);
  return r;
}

// The shape of an exclusive grant of `name`: If(lock key absent, no holder) Then(Put lock key).
Request exclusive_grant(const std::string& name) {
  Request r;
  *r.add_compare() = etcd::compare_create_revision(name + "/lock", 0);
  *r.add_compare() = etcd::compare_none_in(name + "/holders/", name + "/holders0");
  *r.add_success() = etcd::put_op(name + "/lock", "x", 0);
  return r;
}

Request read_only(const std::string& key) {
  Request r;
  *r.add_success() = etcd::get_op(key);
  return r;
}

TEST(TxnFootprint, WritesOfOneKeyConflictAndDistinctKeysDoNot) {
  EXPECT_TRUE(TxnFootprint(create("a")).conflicts_with(TxnFootprint(create("a"))));
  EXPECT_FALSE(TxnFootprint(create("a")).conflicts_with(TxnFootprint(create("b"))));
  // A key is not a prefix of another: "a" and "a0" are distinct.
  EXPECT_FALSE(TxnFootprint(create("a")).conflicts_with(TxnFootprint(create("a0"))));
}

TEST(TxnFootprint, AWriteConflictsWithAReadOfItsKey) {
  EXPECT_TRUE(TxnFootprint(create("a")).conflicts_with(TxnFootprint(read_only("a"))));
  EXPECT_TRUE(TxnFootprint(read_only("a")).conflicts_with(TxnFootprint(create("a"))));
}

// Two shared grants of one name write different holder keys and only read the lock key; in one
// batch they would get one revision, one token for two grants of the key.
TEST(TxnFootprint, TxnsReadingACommonKeyDoNotShareABatch) {
  EXPECT_TRUE(
      TxnFootprint(shared_grant("n", "s1")).conflicts_with(TxnFootprint(shared_grant("n", "s2"))));
  EXPECT_FALSE(
      TxnFootprint(shared_grant("n", "s1")).conflicts_with(TxnFootprint(shared_grant("m", "s2"))));
}

TEST(TxnFootprint, ARangeCompareConflictsWithAWriteInsideIt) {
  // Each writes a key the other only compares: disjoint writes, crossed reads.
  EXPECT_TRUE(
      TxnFootprint(shared_grant("n", "s1")).conflicts_with(TxnFootprint(exclusive_grant("n"))));
  EXPECT_FALSE(
      TxnFootprint(shared_grant("n", "s1")).conflicts_with(TxnFootprint(exclusive_grant("m"))));
  // An open range ("\0": every key from here on) reaches any later key.
  Request all_from_b;
  *all_from_b.add_success() = etcd::range_op("b", std::string(1, '\0'));
  EXPECT_TRUE(TxnFootprint(all_from_b).conflicts_with(TxnFootprint(create("zzz"))));
  EXPECT_FALSE(TxnFootprint(all_from_b).conflicts_with(TxnFootprint(create("a"))));
}

TEST(TxnFootprint, ANestedTxnIsNeverBatched) {
  Request nested;
  *nested.add_success()->mutable_request_txn() = create("a");
  EXPECT_FALSE(TxnFootprint(nested).batchable());
  EXPECT_TRUE(TxnFootprint(nested).conflicts_with(TxnFootprint(create("b"))));
}

TEST(TxnBatcherPlan, ConflictingTxnsGoInLaterBatchesInTheirOrder) {
  const std::vector<TxnFootprint> queue = {
      TxnFootprint(shared_grant("n", "s1")),  // 0
      TxnFootprint(exclusive_grant("n")),     // 1: conflicts with 0
      TxnFootprint(create("other")),          // 2
      TxnFootprint(shared_grant("n", "s2")),  // 3: conflicts with 0 and with 1 (passed)
      TxnFootprint(create("n/lock")),         // 4: conflicts with 0, 1 and 3
  };
  const auto batches = TxnBatcher::plan(queue, 64);
  // 3 and 4 wait for 0 and 1, which queued before them; 4 (writes the lock key 3 reads) after 3.
  const std::vector<std::vector<std::size_t>> expected = {{0, 2}, {1}, {3}, {4}};
  EXPECT_EQ(batches, expected);
  // Whatever follows, every Txn is in exactly one batch and no batch holds a conflicting pair.
  std::vector<int> seen(queue.size(), 0);
  for (const auto& batch : batches) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      ++seen[batch[i]];
      for (std::size_t j = i + 1; j < batch.size(); ++j) {
        EXPECT_FALSE(queue[batch[i]].conflicts_with(queue[batch[j]]))
            << batch[i] << "," << batch[j];
      }
    }
  }
  EXPECT_EQ(seen, (std::vector<int>(queue.size(), 1)));
}

TEST(TxnBatcherPlan, ABatchHoldsAtMostMaxBatch) {
  std::vector<TxnFootprint> queue;
  for (int i = 0; i < 10; ++i) queue.emplace_back(create("k" + std::to_string(i)));
  const auto batches = TxnBatcher::plan(queue, 4);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(), 4u);
  EXPECT_EQ(batches[2].size(), 2u);
}

class EtcdTxnBatchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new testing::EtcdCluster(1); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    channel_ = etcd::make_channel(etcd_->endpoints());
    kv_ = etcdserverpb::KV::NewStub(channel_);
    client_ = std::make_unique<etcd::EtcdClient>(channel_, std::chrono::milliseconds(2000));
  }
  std::string fresh(const std::string& label) {
    static std::atomic<int> n{0};
    return "txn-batch/" + label + "-" + std::to_string(n++);
  }
  void send(const std::vector<BatchedTxn*>& txns) {
    etcd::send_batch(*kv_, std::chrono::system_clock::now() + std::chrono::seconds(2), txns);
  }

  static inline testing::EtcdCluster* etcd_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcd::EtcdClient> client_;
};

TEST_F(EtcdTxnBatchTest, ABatchAppliesEachTxnAtOneRevisionWithItsOwnBranch) {
  const auto a = fresh("a"), b = fresh("b"), taken = fresh("taken");
  etcd_->raw().put(taken, "before");
  const Request ra = create(a), rb = create(b), rt = create(taken);
  BatchedTxn ta{&ra}, tb{&rb}, tt{&rt};
  send({&ta, &tb, &tt});
  ASSERT_TRUE(ta.status.ok()) << ta.status.error_message();
  ASSERT_TRUE(tb.status.ok());
  ASSERT_TRUE(tt.status.ok());
  EXPECT_TRUE(ta.response.succeeded());
  EXPECT_TRUE(tb.response.succeeded());
  EXPECT_FALSE(tt.response.succeeded());  // its own failure branch ran: the key's value
  ASSERT_EQ(tt.response.responses_size(), 1);
  EXPECT_EQ(tt.response.responses(0).response_range().kvs(0).value(), "before");
  // Every write of the batch is at the batch's revision, which every Txn's header carries.
  const auto revision = ta.response.header().revision();
  EXPECT_EQ(tb.response.header().revision(), revision);
  EXPECT_EQ(tt.response.header().revision(), revision);
  EXPECT_EQ(etcd_->raw().get(a)->mod_revision, revision);
  EXPECT_EQ(etcd_->raw().get(b)->mod_revision, revision);
}

TEST_F(EtcdTxnBatchTest, ATxnOnADeadLeaseFailsAloneAndItsMatesAreWritten) {
  const auto dead = client_->lease_grant(30).id();
  client_->lease_revoke(dead);
  const auto a = fresh("a"), b = fresh("b"), c = fresh("c");
  const Request ra = create(a), rb = create(b, dead), rc = create(c);
  BatchedTxn ta{&ra}, tb{&rb}, tc{&rc};
  send({&ta, &tb, &tc});
  EXPECT_TRUE(ta.status.ok()) << ta.status.error_message();
  EXPECT_TRUE(ta.response.succeeded());
  EXPECT_TRUE(tc.status.ok()) << tc.status.error_message();
  EXPECT_TRUE(tc.response.succeeded());
  EXPECT_FALSE(tb.status.ok());
  EXPECT_NE(tb.status.error_message().find("lease not found"), std::string::npos)
      << tb.status.error_message();
  EXPECT_TRUE(etcd_->raw().get(a).has_value());
  EXPECT_FALSE(etcd_->raw().get(b).has_value());
  EXPECT_TRUE(etcd_->raw().get(c).has_value());
}

// Why the grouping rule exists: put together, etcd checks both grants' compares on the same
// snapshot, and grants both — an exclusive lock next to a shared holder. TxnBatcher never puts
// them together (TxnBatcherPlan above).
TEST_F(EtcdTxnBatchTest, CrossedReadsInOneBatchWouldGrantBoth) {
  const auto name = fresh("crossed");
  const Request shared = shared_grant(name, "s1"), exclusive = exclusive_grant(name);
  BatchedTxn ts{&shared}, tx{&exclusive};
  send({&ts, &tx});
  ASSERT_TRUE(ts.status.ok());
  ASSERT_TRUE(tx.status.ok());
  EXPECT_TRUE(ts.response.succeeded());
  EXPECT_TRUE(tx.response.succeeded());
  EXPECT_TRUE(TxnFootprint(shared).conflicts_with(TxnFootprint(exclusive)));
}

// Through the client (every write Txn goes through its TxnBatcher): concurrent writers each get
// their own outcome. Writers race to create shared keys (exactly one wins each), a quarter of
// the writes put on a dead lease (each of those, and only those, is SessionNotFoundError), and
// shared grants race exclusive grants of the same names (never both granted).
TEST_F(EtcdTxnBatchTest, ConcurrentWritersThroughTheClientEachGetTheirOwnOutcome) {
  const auto dead = client_->lease_grant(30).id();
  client_->lease_revoke(dead);
  const auto prefix = fresh("race");
  constexpr int kThreads = 12, kRounds = 40;
  std::atomic<int> wins{0}, dead_refused{0}, wrong{0}, both_granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const std::string key = prefix + "/k" + std::to_string(round);
        try {
          if (t % 4 == 3) {
            client_->txn(create(key + "-dead-" + std::to_string(t), dead), CallKind::kWrite);
            ++wrong;  // a put on a dead lease must fail
          } else if (t % 4 == 2) {
            // Thread 6 takes exclusive grants of the names threads 2 and 10 take shared ones of.
            const std::string name = prefix + "/n" + std::to_string(round);
            client_->txn(
                t == 6 ? exclusive_grant(name) : shared_grant(name, "t" + std::to_string(t)),
                CallKind::kWrite);
          } else if (client_->txn(create(key), CallKind::kWrite).succeeded()) {
            ++wins;
          }
        } catch (const SessionNotFoundError&) {
          if (t % 4 == 3) {
            ++dead_refused;
          } else {
            ++wrong;
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = prefix + "/n" + std::to_string(round);
    const auto reader_a = etcd_->raw().get(name + "/holders/t2");
    const auto reader_b = etcd_->raw().get(name + "/holders/t10");
    if (etcd_->raw().get(name + "/lock") && (reader_a || reader_b)) ++both_granted;
    // Two shared grants of one name never share a revision (the token).
    if (reader_a && reader_b) {
      EXPECT_NE(reader_a->mod_revision, reader_b->mod_revision) << name;
    }
  }
  EXPECT_EQ(wins.load(), kRounds);  // one winner per key
  EXPECT_EQ(dead_refused.load(), kRounds * (kThreads / 4));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(both_granted.load(), 0);
  // The writes did share batches (else this test says nothing about batching).
  const auto& batcher = client_->write_batcher();
  std::cout << "batches " << batcher.batches_sent() << ", txns " << batcher.txns_sent() << "\n";
  EXPECT_LT(batcher.batches_sent(), batcher.txns_sent());
}

// A session open writes its record through the batcher (docs/adr/0030): concurrent opens share
// Txns, and each record still lands on its own session's lease.
TEST_F(EtcdTxnBatchTest, ConcurrentSessionOpensShareTxnsEachRecordOnItsOwnLease) {
  etcd::GrantLeases leases(*client_);
  etcd::Sessions sessions(*client_, leases);
  constexpr int kThreads = 16, kEach = 8;
  std::vector<std::vector<SessionInfo>> opened(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < kEach; ++n) {
        opened[t].push_back(sessions.open("owner-" + std::to_string(t), std::chrono::seconds(30),
                                          std::chrono::milliseconds(0)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<std::int64_t> distinct_leases;
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& info : opened[t]) {
      const auto record = etcd_->raw().get(etcd::session_record_key(info.session_id));
      ASSERT_TRUE(record) << info.session_id;
      EXPECT_NE(record->lease, 0);
      distinct_leases.insert(record->lease);
      // The record's lease is the session's: revoking it ends exactly this session.
      const auto looked_up = sessions.get(info.session_id);
      ASSERT_TRUE(looked_up);
      EXPECT_EQ(looked_up->owner_id, "owner-" + std::to_string(t));
    }
  }
  EXPECT_EQ(distinct_leases.size(), static_cast<std::size_t>(kThreads * kEach));
  const auto& batcher = client_->write_batcher();
  std::cout << "batches " << batcher.batches_sent() << ", txns " << batcher.txns_sent() << "\n";
  EXPECT_EQ(batcher.txns_sent(), static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_LT(batcher.batches_sent(), batcher.txns_sent());
}

}  // namespace
}  // namespace dlock
