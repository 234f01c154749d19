#pragma once

// Group commit of the PostgreSQL store's writes (docs/adr/0019-pg-batched-writes.md): writes
// that arrive while one batch is at the database form the next one, which goes out in one
// pipelined transaction on one pooled connection (one round trip, one WAL flush). Each write
// keeps its own outcome; none is answered before the COMMIT that made it durable returned.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/pg/pg_connection.h"
#include "store/pg/pg_pool.h"

namespace dlock::store::pg {

// One write statement and its own outcome: a result or an error.
struct PgWrite {
  const char* statement;
  std::vector<std::string> params;
  std::optional<PgResult> result;
  std::exception_ptr error;
};

// The prepared statements run_batch merges: several heartbeats of one batch run as one
// heartbeat_many over the array of their session IDs (pg_statements.h kHeartbeatMany).
inline constexpr const char* kHeartbeatStatement = "heartbeat";
inline constexpr const char* kHeartbeatManyStatement = "heartbeat_many";

// PostgreSQL's text form of a text[] holding `values` (each quoted, `"` and `\` escaped).
std::string text_array(const std::vector<std::string_view>& values);

// Runs `writes` on `connection` and gives each its outcome. One write alone runs as one
// autocommitted statement (as without batching). Several run in one pipelined transaction
// (PgConnection::execute_pipelined); when one of them fails, nothing is written, the others run
// again first as a batch, and the failed write then runs again alone, so no write inherits
// another's error. A failure of the transaction itself (its COMMIT, the connection) is every
// write's outcome. Several heartbeats run as one statement after the other writes, and each
// gets the row of its own session (none: not found or expired); a session row locked elsewhere
// is skipped there and its heartbeat runs again alone; when that statement fails while the
// connection is sound, each heartbeat runs again alone for its own outcome.
// Deadlines (docs/adr/0028-pg-batch-deadlines.md): the first pass is cancelled at one call
// timeout, everything run again at two; a write not run to its end by then is UnavailableError
// with nothing of it written. So every write is answered within two call timeouts.
void run_batch(PgConnection& connection, const std::vector<PgWrite*>& writes);

// The leader/follower queue in front of run_batch: the first write runs at once; writes arriving
// meanwhile wait and form the next batch (no timer). At most one batch is at the database. When
// a batch is done, its writes are woken and, if writes are queued, the oldest of them, which
// leads the next batch; no other waiter is woken.
class PgBatcher {
 public:
  explicit PgBatcher(PgPool& pool, std::size_t max_batch = 128);
  PgBatcher(const PgBatcher&) = delete;
  PgBatcher& operator=(const PgBatcher&) = delete;

  // Runs the prepared write `statement` in the next batch; returns its result once committed,
  // or throws its own error (the errors of PgConnection::execute).
  PgResult execute(const char* statement, std::initializer_list<std::string_view> params);

 private:
  struct Waiter {
    PgWrite* write;
    bool done = false;
    bool lead = false;  // the batch at the database is done and this one leads the next
    std::condition_variable wake;
  };
  void run(const std::vector<Waiter*>& batch);

  PgPool& pool_;
  const std::size_t max_batch_;
  std::mutex mutex_;
  std::deque<Waiter*> queue_;
  bool running_ = false;  // a batch is at the database, or its successor's leader is woken
};

}  // namespace dlock::store::pg
