#include "store/etcd/etcd_txn_batch.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

namespace dlock::store::etcd {
namespace {

// etcd's range_end: empty = the single key, "\0" = every key from `key` on.
std::string span_end(const std::string& key, const std::string& range_end) {
  if (range_end.empty()) return key + std::string(1, '\0');
  if (range_end == std::string(1, '\0')) return {};
  return range_end;
}

// Whether a failed batch may have failed for one Txn's own reason, having written nothing:
// etcd checks a Txn's leases and its size before applying anything (a lease not found,
// NOT_FOUND; a request too large or with too many operations, INVALID_ARGUMENT; a compacted
// revision, OUT_OF_RANGE). Anything else (unavailable, deadline, no leader, cancelled) may have
// been applied, or is the connection's, so it is every Txn's outcome.
bool may_be_one_txns_failure(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return true;
    default:
      return false;
  }
}

grpc::Status send_one(etcdserverpb::KV::Stub& kv, std::chrono::system_clock::time_point deadline,
                      const etcdserverpb::TxnRequest& request,
                      etcdserverpb::TxnResponse& response) {
  grpc::ClientContext context;
  context.set_deadline(deadline);
  return kv.Txn(&context, request, &response);
}

// Moves the items of `from` at the ascending positions `picked` out, in order; the others stay.
template <typename Item, typename Sequence>
std::vector<Item> take_picked(Sequence& from, const std::vector<std::size_t>& picked) {
  std::vector<Item> taken;
  taken.reserve(picked.size());
  Sequence rest;
  std::size_t next = 0;
  for (std::size_t j = 0; j < from.size(); ++j) {
    if (next < picked.size() && picked[next] == j) {
      taken.push_back(std::move(from[j]));
      ++next;
    } else {
      rest.push_back(std::move(from[j]));
    }
  }
  from = std::move(rest);
  return taken;
}

}  // namespace

TxnFootprint::TxnFootprint(const etcdserverpb::TxnRequest& request) {
  for (const auto& compare : request.compare()) add(reads_, compare.key(), compare.range_end());
  add_ops(request.success());
  add_ops(request.failure());
}

void TxnFootprint::add(std::vector<Span>& to, const std::string& key,
                       const std::string& range_end) {
  to.push_back(Span{key, span_end(key, range_end)});
}

void TxnFootprint::add_ops(const google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>& ops) {
  for (const auto& op : ops) {
    switch (op.request_case()) {
      case etcdserverpb::RequestOp::kRequestRange:
        add(reads_, op.request_range().key(), op.request_range().range_end());
        break;
      case etcdserverpb::RequestOp::kRequestPut:
        add(writes_, op.request_put().key(), {});
        break;
      case etcdserverpb::RequestOp::kRequestDeleteRange:
        add(writes_, op.request_delete_range().key(), op.request_delete_range().range_end());
        break;
      default:  // a nested Txn, or an operation this subset does not know
        batchable_ = false;
    }
  }
}

bool TxnFootprint::overlap(const std::vector<Span>& a, const std::vector<Span>& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      // [x.begin, x.end) and [y.begin, y.end) meet; an empty end is unbounded.
      if ((y.end.empty() || x.begin < y.end) && (x.end.empty() || y.begin < x.end)) return true;
    }
  }
  return false;
}

bool TxnFootprint::conflicts_with(const TxnFootprint& other) const {
  if (!batchable_ || !other.batchable_) return true;
  // Serializable: neither writes what the other reads or writes. And Txns that read a common
  // key (two shared grants of one name compare its lock key) go in different batches, so that
  // two grants of one name never get one revision: a token stays unique per key (C2).
  return overlap(writes_, other.writes_) || overlap(writes_, other.reads_) ||
         overlap(reads_, other.writes_) || overlap(reads_, other.reads_);
}

void TxnFootprint::merge(const TxnFootprint& other) {
  reads_.insert(reads_.end(), other.reads_.begin(), other.reads_.end());
  writes_.insert(writes_.end(), other.writes_.begin(), other.writes_.end());
  batchable_ = batchable_ && other.batchable_;
}

void send_batch(etcdserverpb::KV::Stub& kv, std::chrono::system_clock::time_point deadline,
                const std::vector<BatchedTxn*>& txns) {
  if (txns.size() == 1) {
    txns[0]->status = send_one(kv, deadline, *txns[0]->request, txns[0]->response);
    return;
  }
  etcdserverpb::TxnRequest batch;  // no compare: the success branch runs, every nested Txn in it
  for (const auto* txn : txns) *batch.add_success()->mutable_request_txn() = *txn->request;
  etcdserverpb::TxnResponse answer;
  const grpc::Status status = send_one(kv, deadline, batch, answer);
  if (status.ok() && answer.responses_size() != static_cast<int>(txns.size())) {
    // Not etcd's answer to this request: nothing can be said about any Txn of it.
    for (auto* txn : txns) {
      txn->status =
          grpc::Status(grpc::StatusCode::INTERNAL,
                       "batched txn answered with " + std::to_string(answer.responses_size()) +
                           " responses for " + std::to_string(txns.size()));
    }
    return;
  }
  if (status.ok()) {
    for (std::size_t i = 0; i < txns.size(); ++i) {
      auto& nested = *answer.mutable_responses(static_cast<int>(i))->mutable_response_txn();
      txns[i]->response = std::move(nested);
      *txns[i]->response.mutable_header() = answer.header();
      txns[i]->status = grpc::Status::OK;
    }
    return;
  }
  for (auto* txn : txns) {
    txn->status = may_be_one_txns_failure(status)
                      ? send_one(kv, deadline, *txn->request, txn->response)
                      : status;
  }
}

TxnBatcher::TxnBatcher(etcdserverpb::KV::Stub& kv, std::chrono::milliseconds call_timeout,
                       std::size_t max_batch)
    : kv_(kv), call_timeout_(call_timeout), max_batch_(std::max<std::size_t>(1, max_batch)) {}

std::vector<std::size_t> TxnBatcher::pick(const std::vector<const TxnFootprint*>& queue,
                                          std::size_t max_batch) {
  std::vector<std::size_t> batch;
  if (queue.empty()) return batch;
  batch.push_back(0);
  TxnFootprint taken = *queue[0];
  std::optional<TxnFootprint> passed;  // the footprints of the ones left for a later batch
  for (std::size_t i = 1; i < queue.size() && batch.size() < max_batch; ++i) {
    const TxnFootprint& next = *queue[i];
    if (next.conflicts_with(taken) || (passed && next.conflicts_with(*passed))) {
      if (passed) {
        passed->merge(next);
      } else {
        passed = next;
      }
      continue;
    }
    batch.push_back(i);
    taken.merge(next);
  }
  return batch;
}

std::vector<std::vector<std::size_t>> TxnBatcher::plan(const std::vector<TxnFootprint>& queue,
                                                       std::size_t max_batch) {
  std::vector<std::size_t> left(queue.size());
  for (std::size_t i = 0; i < left.size(); ++i) left[i] = i;
  std::vector<std::vector<std::size_t>> batches;
  while (!left.empty()) {
    std::vector<const TxnFootprint*> view;
    for (const std::size_t i : left) view.push_back(&queue[i]);
    batches.push_back(take_picked<std::size_t>(left, pick(view, max_batch)));
  }
  return batches;
}

std::vector<TxnBatcher::Waiter*> TxnBatcher::take_batch() {
  std::vector<const TxnFootprint*> view;
  view.reserve(queue_.size());
  for (const Waiter* waiter : queue_) view.push_back(&waiter->footprint);
  return take_picked<Waiter*>(queue_, pick(view, max_batch_));
}

BatchedTxn TxnBatcher::run(const etcdserverpb::TxnRequest& request) {
  BatchedTxn txn;
  txn.request = &request;
  Waiter self{
      &txn, TxnFootprint(request), std::chrono::system_clock::now() + call_timeout_, false, {}};
  std::unique_lock lock(mutex_);
  queue_.push_back(&self);
  while (!self.done) {
    if (sending_ || queue_.empty()) {
      self.wake.wait(lock);
      continue;
    }
    // Lead the next batch (which may not hold this write, if an earlier one conflicts with it).
    const std::vector<Waiter*> batch = take_batch();
    // The batch's deadline is its earliest writer's: none waits for etcd beyond its own.
    auto deadline = batch.front()->deadline;
    for (const Waiter* waiter : batch) deadline = std::min(deadline, waiter->deadline);
    sending_ = true;
    lock.unlock();
    batches_sent_.fetch_add(1, std::memory_order_relaxed);
    txns_sent_.fetch_add(batch.size(), std::memory_order_relaxed);
    std::vector<BatchedTxn*> txns;
    txns.reserve(batch.size());
    for (Waiter* waiter : batch) txns.push_back(waiter->txn);
    try {
      send_batch(kv_, deadline, txns);
    } catch (const std::exception& e) {  // never leave the batch's writers waiting
      for (BatchedTxn* t : txns) t->status = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    lock.lock();
    sending_ = false;
    for (Waiter* waiter : batch) {
      waiter->done = true;
      if (waiter != &self) waiter->wake.notify_one();
    }
    // The writes that queued meanwhile: the first of them leads the next batch (unless this
    // thread, not done yet, goes round and leads it itself).
    if (self.done && !queue_.empty()) queue_.front()->wake.notify_one();
  }
  txn.request = nullptr;
  return txn;
}

}  // namespace dlock::store::etcd
