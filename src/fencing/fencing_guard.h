#pragma once

// The fencing guard for PostgreSQL resources (docs/fencing.md).
//
// A lock alone cannot give mutual exclusion: a holder can pause past its lease and write after
// another holder took over. The resource must therefore remember, per fenced resource, the
// highest fencing token it has accepted, and apply a write only in the same transaction that
// checks and raises it. admit() is that check: one statement, run inside the caller's
// transaction, which takes the resource row's lock until the transaction ends, so two writers
// of one resource are serialized and a write stamped with a smaller token is refused.
//
//   dlock::fencing::Transaction tx(conn);                       // BEGIN
//   if (dlock::fencing::admit(conn, "payouts/batch-17", lock->token()) ==
//       dlock::fencing::Admission::kStale) {
//     return;                                                   // ~Transaction: ROLLBACK
//   }
//   exec(conn, "INSERT INTO ledger ...");                       // the fenced write
//   tx.commit();                                                // COMMIT
//
// The same token may write repeatedly (token >= highest: one grant, many writes); tokens are
// unique per grant, so a new grant always carries a strictly greater token than the last.

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dlock/types.h"

struct pg_conn;

namespace dlock::fencing {

// The DDL of src/fencing/fencing_guard.sql (CREATE TABLE IF NOT EXISTS fencing_resource ...).
std::string_view schema_sql();

// A statement failed (connection broken, SQL error). The transaction must be rolled back; whether
// a COMMIT that failed this way was applied is unknown to the caller.
class FencingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Creates the fencing_resource table if it does not exist. Takes a transaction-scoped advisory
// lock so that several processes installing it at once do not collide.
void install_schema(pg_conn* conn);

enum class Admission {
  kAdmitted,  // token >= highest accepted: the highest is now `token`; go on and write
  kStale,     // a greater token was accepted already: the caller's grant is over; do not write
};

// Checks and raises the highest accepted token of `resource`, in the caller's open
// transaction (throws FencingError if none is open). On kAdmitted the row stays locked until
// the transaction ends. `holder_key` (e.g. the dlock key) is recorded for diagnostics.
Admission admit(pg_conn* conn, std::string_view resource, FencingToken token,
                std::string_view holder_key = {});

// The highest token `resource` has accepted, or 0 when it has accepted none.
FencingToken highest_accepted(pg_conn* conn, std::string_view resource);

// RAII transaction on a libpq connection: BEGIN on construction, ROLLBACK on destruction
// unless commit() succeeded.
class Transaction {
 public:
  explicit Transaction(pg_conn* conn);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Throws FencingError when COMMIT fails (then the outcome may be unknown).
  void commit();

 private:
  pg_conn* conn_;
  bool open_ = true;
};

// Runs one statement with text parameters and throws FencingError unless it succeeded. Returns
// the number of rows it returned or affected.
int exec(pg_conn* conn, const std::string& sql, std::initializer_list<std::string> params = {});

}  // namespace dlock::fencing
