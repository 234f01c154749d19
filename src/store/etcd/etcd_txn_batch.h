#pragma once

// Batched etcd writes (docs/adr/0023-etcd-batched-txns.md): write Txns that arrive while a batch
// is at etcd form the next one, sent as one Txn whose success branch holds each of them as a
// nested Txn (RequestOp.request_txn). etcd evaluates every nested Txn's compares on one
// snapshot and applies the whole batch as one Raft entry at one revision, so a batch may only
// hold Txns whose keys are disjoint (TxnFootprint); then the batch is the same as running its
// Txns one after another, and no two grants of one key share the batch's revision. Each Txn keeps
// its own outcome: a batch that fails for what may be one Txn's reason (a lease that does not
// exist, a refused request) wrote nothing, and each of its Txns runs again alone.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "store/etcd/proto/rpc.grpc.pb.h"

namespace dlock::store::etcd {

// The keys a Txn reads (its compares and ranges, both branches) and writes (its puts and
// deletes, both branches), as [begin, end) spans; `end` empty = every key from `begin` on.
class TxnFootprint {
 public:
  explicit TxnFootprint(const etcdserverpb::TxnRequest& request);

  // False for a Txn that holds a nested Txn itself: it always runs alone.
  bool batchable() const { return batchable_; }
  // Whether the two may not share a batch: one writes a key the other reads or writes, or both
  // read a common key (every Txn batched is a write: two that decide on one key, e.g. two shared
  // grants of one name, must not share a revision, the token).
  bool conflicts_with(const TxnFootprint& other) const;
  // Adds `other`'s spans to this one (the footprint of a whole batch).
  void merge(const TxnFootprint& other);

 private:
  struct Span {
    std::string begin;
    std::string end;
  };
  void add(std::vector<Span>& to, const std::string& key, const std::string& range_end);
  void add_ops(const google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>& ops);
  static bool overlap(const std::vector<Span>& a, const std::vector<Span>& b);

  std::vector<Span> reads_;
  std::vector<Span> writes_;
  bool batchable_ = true;
};

// One write Txn of a batch and its outcome: `status` not OK = the call failed (the caller turns
// it into its dlock error with throw_for_status), else `response`.
struct BatchedTxn {
  const etcdserverpb::TxnRequest* request = nullptr;
  etcdserverpb::TxnResponse response = {};
  grpc::Status status = grpc::Status::OK;
};

// Sends `txns` (pairwise free of conflicts) and fills in each outcome. One Txn is sent as
// itself, exactly the call made without batching. Several are sent as one Txn with no compare
// and one nested Txn each; each gets its nested response with the batch's header (the batch's
// revision is the revision of every write in it). A failure that may be one Txn's own (a lease
// not found, a refused request: nothing was written) runs each Txn again alone; any other
// failure (unavailable, deadline, no leader: the batch may or may not have been applied) is
// every Txn's outcome.
void send_batch(etcdserverpb::KV::Stub& kv, std::chrono::system_clock::time_point deadline,
                const std::vector<BatchedTxn*>& txns);

// The queue in front of send_batch: a write that finds no batch at etcd goes at once, with every
// queued write that does not conflict with it (FIFO, at most `max_batch`); the others wait and go
// in a later batch (no timer). A batch of one costs one mutex more than the plain call. Each
// write's deadline is its call timeout from when it was queued, and a batch is sent with its
// earliest writer's: no write waits for etcd beyond its own deadline (a write queued behind a batch
// has a later deadline than every write in it).
class TxnBatcher {
 public:
  TxnBatcher(etcdserverpb::KV::Stub& kv, std::chrono::milliseconds call_timeout,
             std::size_t max_batch = 64);
  TxnBatcher(const TxnBatcher&) = delete;
  TxnBatcher& operator=(const TxnBatcher&) = delete;

  // Runs the write `request` in a batch and returns its own outcome.
  BatchedTxn run(const etcdserverpb::TxnRequest& request);

  // Batches sent and the Txns in them, since construction: their ratio is the mean batch size.
  std::uint64_t batches_sent() const { return batches_sent_.load(std::memory_order_relaxed); }
  std::uint64_t txns_sent() const { return txns_sent_.load(std::memory_order_relaxed); }

  // The batches `queue` would be sent as, in order (for tests): each a list of indices.
  static std::vector<std::vector<std::size_t>> plan(const std::vector<TxnFootprint>& queue,
                                                    std::size_t max_batch);

 private:
  struct Waiter {
    BatchedTxn* txn;
    TxnFootprint footprint;
    std::chrono::system_clock::time_point deadline;  // queued at + the call timeout
    bool done = false;
    std::condition_variable wake;  // done, or a batch may be led: woken alone, never in a herd
  };
  // Indices into `queue` of the next batch: the first, then every later one that conflicts
  // neither with the batch nor with one passed over (writes to one key keep their order).
  static std::vector<std::size_t> pick(const std::vector<const TxnFootprint*>& queue,
                                       std::size_t max_batch);
  std::vector<Waiter*> take_batch();

  etcdserverpb::KV::Stub& kv_;
  const std::chrono::milliseconds call_timeout_;
  const std::size_t max_batch_;
  std::mutex mutex_;
  std::deque<Waiter*> queue_;
  bool sending_ = false;  // a batch is at etcd (one at a time)
  std::atomic<std::uint64_t> batches_sent_{0};
  std::atomic<std::uint64_t> txns_sent_{0};
};

}  // namespace dlock::store::etcd
