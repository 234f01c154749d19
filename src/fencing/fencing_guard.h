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
//   dlock::fencing::bind_resource(conn, "batch-17", "payouts/batch-17");  // once, at set-up
//   dlock::fencing::Transaction tx(conn);                       // BEGIN
//   if (dlock::fencing::admit(conn, "batch-17", lock->token(), lock->key()) ==
//       dlock::fencing::Admission::kStale) {
//     return;                                                   // ~Transaction: ROLLBACK
//   }
//   exec(conn, "INSERT INTO ledger ...");                       // the fenced write
//   tx.commit();                                                // COMMIT
//
// The same token may write repeatedly (token >= highest: one grant, many writes); tokens are
// unique per grant, so a new grant always carries a strictly greater token than the last.
//
// Tokens are ordered per lock key only: a token of another key says nothing about this
// resource's holders (on sqlite and pg each key counts on its own; on etcd a busy unrelated key
// runs far ahead). So each resource is bound to the one lock key that protects it, and a token
// of any other key is refused with LockKeyMismatchError instead of being compared.

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dlock/errors.h"
#include "dlock/types.h"

struct pg_conn;

namespace dlock::fencing {

// The DDL of src/fencing/fencing_guard.sql (CREATE TABLE IF NOT EXISTS fencing_resource ...).
std::string_view schema_sql();

// A statement failed (connection broken, SQL error: code kUnavailable), or the guard was
// misused (kInvalidArgument). The transaction must be rolled back; whether a COMMIT that failed
// this way was applied is unknown to the caller. A dlock::Error (ADR-0003).
class FencingError : public Error {
 public:
  explicit FencingError(const std::string& message, ErrorCode code = ErrorCode::kUnavailable)
      : Error(code, message) {}
};

// The resource is protected by another lock key than the one whose token was presented: a
// configuration or programming error (kInvalidArgument), never a decision. The transaction must
// be rolled back.
class LockKeyMismatchError : public FencingError {
 public:
  explicit LockKeyMismatchError(const std::string& message)
      : FencingError(message, ErrorCode::kInvalidArgument) {}
};

// Creates the fencing_resource table if it does not exist. Takes a transaction-scoped advisory
// lock so that several processes installing it at once do not collide.
void install_schema(pg_conn* conn);

// Binds `resource` to `lock_key`, the dlock key whose holders may write it (as the client names
// it: Lock::key()). Idempotent; throws LockKeyMismatchError when the resource is bound to another
// key already (a binding never changes). Runs in the caller's transaction when one is open.
// A resource never bound is bound by its first admission; bind ahead to close that first-use
// window.
void bind_resource(pg_conn* conn, std::string_view resource, std::string_view lock_key);

enum class Admission {
  kAdmitted,  // token >= highest accepted (and above every admitted reader's): the highest is
              // now `token`; go on and write
  kStale,     // a greater token was accepted already: the caller's grant is over; do not write
};

// Checks and raises the highest accepted token of `resource`, in the caller's open
// transaction (throws FencingError if none is open). `lock_key` is the key the token belongs
// to (required): a resource bound to another key throws LockKeyMismatchError; an unbound one
// is bound to `lock_key`. On kAdmitted the row stays locked until the transaction ends.
Admission admit(pg_conn* conn, std::string_view resource, FencingToken token,
                std::string_view lock_key);

// The read side of a read-write lock (docs/fencing.md, "Read-write locks"): a holder of a shared
// grant of `lock_key` presents its token before it reads `resource`, in the caller's open
// transaction. Admitted when no writer with a greater token has written (token >= the highest
// accepted write token); the resource then remembers the greatest reader token, and admit()
// refuses every writer whose token is not above it. Readers are admitted in any order among
// themselves. kStale: a later writer has written; what this reader would read is not what its
// grant protected. The row stays locked until the transaction ends (readers of one resource
// are serialized for that long: keep the transaction short).
Admission admit_read(pg_conn* conn, std::string_view resource, FencingToken token,
                     std::string_view lock_key);

// The highest token `resource` has accepted, or 0 when it has accepted none.
FencingToken highest_accepted(pg_conn* conn, std::string_view resource);

// The lock key `resource` is bound to, or empty when it is not bound.
std::string bound_key(pg_conn* conn, std::string_view resource);

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
