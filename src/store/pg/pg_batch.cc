#include "store/pg/pg_batch.h"

#include <chrono>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "dlock/errors.h"
#include "store/pg/pg_statements.h"

namespace dlock::store::pg {
namespace {

using Clock = std::chrono::steady_clock;

// A batch's two deadlines (docs/adr/0028-pg-batch-deadlines.md): one call timeout for the batch
// as it came, a second one shared by every write that runs again after a failure.
struct Deadlines {
  Deadline first;
  Deadline again;
};

std::exception_ptr out_of_time() {
  return std::make_exception_ptr(
      UnavailableError("pg: the batch ran out of its call timeout before this write could run "
                       "again; nothing of it was written"));
}

// The one write of a batch of one: an autocommitted statement, as without batching.
void run_single(PgConnection& connection, PgWrite& write) {
  try {
    write.result.emplace(connection.execute(write.statement, write.params));
  } catch (...) {
    write.error = std::current_exception();
  }
}

// A write that runs again alone, cancelled if it is not done by `deadline`.
void run_alone(PgConnection& connection, PgWrite& write, Deadline deadline) {
  if (Clock::now() >= deadline) {
    write.error = out_of_time();
    return;
  }
  try {
    std::size_t failed = 0;
    std::exception_ptr failure;
    auto results = connection.execute_pipelined({{write.statement, &write.params}}, &failed,
                                                deadline, &failure);
    if (results) {
      write.result.emplace(std::move(results->front()));
    } else {
      write.error = failure;
    }
  } catch (...) {
    write.error = std::current_exception();
  }
}

// The writes of run_batch without the merging of heartbeats.
void run_writes(PgConnection& connection, const std::vector<PgWrite*>& writes,
                const Deadlines& deadlines) {
  if (writes.size() == 1) return run_single(connection, *writes.front());
  std::vector<PgWrite*> pending = writes;
  // The writes that failed in a pass, with their own error: rolled back, to run again alone.
  std::vector<std::pair<PgWrite*, std::exception_ptr>> failed_writes;
  Deadline deadline = deadlines.first;
  while (pending.size() > 1 && Clock::now() < deadline) {
    std::vector<PreparedCall> calls;
    calls.reserve(pending.size());
    for (const auto* write : pending) calls.push_back({write->statement, &write->params});
    std::size_t failed = 0;
    std::exception_ptr failure;
    std::optional<std::vector<PgResult>> results;
    try {
      results = connection.execute_pipelined(calls, &failed, deadline, &failure);
    } catch (...) {
      for (auto* write : pending) write->error = std::current_exception();
      pending.clear();
      break;
    }
    if (results) {
      for (std::size_t i = 0; i < pending.size(); ++i) {
        pending[i]->result.emplace(std::move((*results)[i]));
      }
      pending.clear();
      break;
    }
    // Rolled back: the rest try again first, so the write that failed (a row locked elsewhere,
    // say, waited for until the timeout) holds none of them up; it runs again alone after them.
    failed_writes.emplace_back(pending[failed], failure);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(failed));
    deadline = deadlines.again;
  }
  if (pending.size() == 1) {
    run_alone(connection, *pending.front(), deadline);
  } else {
    for (auto* write : pending) write->error = out_of_time();  // never ran to its end
  }
  for (auto& [write, failure] : failed_writes) {
    // Its failure may have been a batch mate's doing (a deadlock over their locks): alone, in
    // time, it learns its own outcome; out of time, its failure is its outcome.
    if (connection.healthy() && Clock::now() < deadlines.again) {
      run_alone(connection, *write, deadlines.again);
    } else {
      write->error = failure;
    }
  }
}

bool is_heartbeat(const PgWrite& write) {
  return std::string_view(write.statement) == kHeartbeatStatement && write.params.size() == 1;
}

}  // namespace

std::string text_array(const std::vector<std::string_view>& values) {
  std::string literal = "{";
  for (const auto value : values) {
    if (literal.size() > 1) literal += ',';
    literal += '"';
    for (const char c : value) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  literal += '}';
  return literal;
}

void run_batch(PgConnection& connection, const std::vector<PgWrite*>& writes) {
  const auto started = Clock::now();
  const Deadlines deadlines{started + connection.call_timeout(),
                            started + 2 * connection.call_timeout()};
  std::vector<PgWrite*> heartbeats;
  std::vector<PgWrite*> rest;
  for (auto* write : writes) (is_heartbeat(*write) ? heartbeats : rest).push_back(write);
  if (heartbeats.size() < 2) return run_writes(connection, writes, deadlines);

  // Several heartbeats: one statement over their session IDs, after the other writes
  // (docs/adr/0027-pg-heartbeats-in-one-statement.md).
  std::vector<std::string_view> sessions;
  sessions.reserve(heartbeats.size());
  for (const auto* beat : heartbeats) sessions.push_back(beat->params.front());
  PgWrite merged{kHeartbeatManyStatement, {text_array(sessions)}, std::nullopt, nullptr};
  rest.push_back(&merged);
  run_writes(connection, rest, deadlines);
  if (merged.error && !connection.healthy()) {
    // The connection broke under the batch: its outcome is every write's, as for the others.
    for (auto* beat : heartbeats) beat->error = merged.error;
    return;
  }
  // The heartbeats to run again alone: all of them when the statement failed (a timeout, a
  // deadlock: not known to be any one's), else those whose session row was locked elsewhere.
  std::vector<PgWrite*> again;
  if (merged.error) {
    again = heartbeats;
  } else {
    // Each heartbeat gets the row of its session, or no row: not found or expired.
    const PgResult& renewed = *merged.result;
    constexpr int kSession = sql::kHeartbeatManyColumns["session_id"];
    std::unordered_map<std::string, int> row_of;
    std::unordered_set<std::string> skipped;
    for (int row = 0; row < renewed.rows(); ++row) {
      if (renewed.boolean(row, sql::kHeartbeatManyColumns["skipped"])) {
        skipped.insert(renewed.text(row, kSession));
      } else {
        row_of.emplace(renewed.text(row, kSession), row);
      }
    }
    for (auto* beat : heartbeats) {
      if (skipped.contains(beat->params.front())) {
        again.push_back(beat);
        continue;
      }
      const auto found = row_of.find(beat->params.front());
      beat->result.emplace(found == row_of.end() ? renewed.slice(0, 0)
                                                 : renewed.slice(found->second, 1));
    }
  }
  for (auto* beat : again) run_alone(connection, *beat, deadlines.again);
}

PgBatcher::PgBatcher(PgPool& pool, std::size_t max_batch)
    : pool_(pool), max_batch_(max_batch == 0 ? 1 : max_batch) {}

PgResult PgBatcher::execute(const char* statement, std::initializer_list<std::string_view> params) {
  PgWrite write{statement, {params.begin(), params.end()}, std::nullopt, nullptr};
  Waiter self{&write, false, false, {}};
  std::unique_lock lock(mutex_);
  queue_.push_back(&self);
  if (running_) {
    // A batch is at the database: this write is in a later one, and woken (alone) when that is
    // done or when it is to lead it.
    self.wake.wait(lock, [&] { return self.done || self.lead; });
  } else {
    // No batch at the database (so the queue held no one else): lead the next one at once.
    running_ = true;
    self.lead = true;
  }
  if (!self.done) {
    // Lead: the oldest writes first, this one at the front.
    std::vector<Waiter*> batch;
    while (!queue_.empty() && batch.size() < max_batch_) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    run(batch);
    lock.lock();
    // Under the lock: a woken waiter returns (and its condition variable dies) only after the
    // lock is released.
    for (auto* waiter : batch) {
      waiter->done = true;
      if (waiter != &self) waiter->wake.notify_one();
    }
    if (queue_.empty()) {
      running_ = false;
    } else {
      queue_.front()->lead = true;
      queue_.front()->wake.notify_one();
    }
  }
  lock.unlock();
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
