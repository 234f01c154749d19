#include "store/pg/pg_batch.h"

#include <utility>

namespace dlock::store::pg {
namespace {

void run_alone(PgConnection& connection, PgWrite& write) {
  try {
    write.result.emplace(connection.execute(write.statement, write.params));
  } catch (...) {
    write.error = std::current_exception();
  }
}

}  // namespace

void run_batch(PgConnection& connection, const std::vector<PgWrite*>& writes) {
  std::vector<PgWrite*> pending = writes;
  while (pending.size() > 1) {
    std::vector<PreparedCall> calls;
    calls.reserve(pending.size());
    for (const auto* write : pending) calls.push_back({write->statement, &write->params});
    std::size_t failed = 0;
    std::optional<std::vector<PgResult>> results;
    try {
      results = connection.execute_pipelined(calls, &failed);
    } catch (...) {
      for (auto* write : pending) write->error = std::current_exception();
      return;
    }
    if (results) {
      for (std::size_t i = 0; i < pending.size(); ++i) {
        pending[i]->result.emplace(std::move((*results)[i]));
      }
      return;
    }
    // Rolled back: the write that failed learns its own outcome alone; the rest try again.
    run_alone(connection, *pending[failed]);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(failed));
  }
  if (pending.size() == 1) run_alone(connection, *pending.front());
}

PgBatcher::PgBatcher(PgPool& pool, std::size_t max_batch)
    : pool_(pool), max_batch_(max_batch == 0 ? 1 : max_batch) {}

PgResult PgBatcher::execute(const char* statement, std::initializer_list<std::string_view> params) {
  PgWrite write{statement, {params.begin(), params.end()}, std::nullopt, nullptr};
  Waiter self{&write};
  std::unique_lock lock(mutex_);
  queue_.push_back(&self);
  while (!self.done) {
    finished_.wait(lock, [&] { return self.done || !running_; });
    if (self.done) break;
    // No batch at the database: lead the next one, the oldest writes first.
    running_ = true;
    std::vector<Waiter*> batch;
    while (!queue_.empty() && batch.size() < max_batch_) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    run(batch);
    lock.lock();
    for (auto* waiter : batch) waiter->done = true;
    running_ = false;
    finished_.notify_all();
  }
  if (write.error) std::rethrow_exception(write.error);
  return std::move(*write.result);
}

void PgBatcher::run(const std::vector<Waiter*>& batch) {
  std::vector<PgWrite*> writes;
  writes.reserve(batch.size());
  for (auto* waiter : batch) writes.push_back(waiter->write);
  try {
    auto connection = pool_.lease();
    run_batch(*connection, writes);
  } catch (...) {
    // No connection within the call timeout: nothing ran.
    for (auto* write : writes) {
      if (!write->result && !write->error) write->error = std::current_exception();
    }
  }
}

}  // namespace dlock::store::pg
