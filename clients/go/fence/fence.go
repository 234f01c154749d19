// Package fence is the fencing guard helper of the Go client: a thin function over the user's
// own PostgreSQL driver and transaction, calling the guard's SQL functions
// (src/fencing/fencing_guard.sql, docs/fencing.md "The guard from any language"). It imports no
// driver: pass your transaction's QueryRow method, whatever the driver —
//
//	ok, err := fence.Admit(ctx, tx.QueryRow, "ledger", lock.Token(), lock.Key())        // pgx
//	ok, err := fence.Admit(ctx, tx.QueryRowContext, "ledger", lock.Token(), lock.Key()) // database/sql
//
// Call it inside the transaction that makes the fenced write, then write, then COMMIT. true:
// admitted (the resource row stays locked until the transaction ends); false: stale, a greater
// token was accepted — roll back and do not write.
package fence

import (
	"context"
	"errors"
	"fmt"
)

// Row is what a driver's QueryRow answers: pgx.Row, *sql.Row.
type Row interface {
	Scan(dest ...any) error
}

// The errors of the guard's functions, by SQLSTATE: compare with errors.Is.
var (
	// ErrOtherKey (DL001): the resource is bound to another lock key. A configuration error,
	// never a decision: roll back.
	ErrOtherKey = errors.New("fence: the resource is bound to another lock key")
	// ErrBadArgument (DL002): an empty resource or lock key, or a token <= 0.
	ErrBadArgument = errors.New("fence: bad argument")
)

// Error is a refusal of the guard's functions: Kind is ErrOtherKey or ErrBadArgument, Err the
// driver's error (its message names the resource and keys).
type Error struct {
	Kind error
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %v", e.Kind, e.Err) }

// Is matches the kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap is the driver's error.
func (e *Error) Unwrap() error { return e.Err }

// typed maps the guard's SQLSTATEs to their kinds; drivers expose SQLState() (pgx's
// *pgconn.PgError, lib/pq's *pq.Error).
func typed(err error) error {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		switch coded.SQLState() {
		case "DL001":
			return &Error{Kind: ErrOtherKey, Err: err}
		case "DL002":
			return &Error{Kind: ErrBadArgument, Err: err}
		}
	}
	return err
}

func admit[R Row](ctx context.Context, queryRow func(context.Context, string, ...any) R, function, resource string, token int64, lockKey string) (bool, error) {
	var admitted bool
	err := queryRow(ctx, "SELECT "+function+"($1::text, $2::bigint, $3::text)", resource, token, lockKey).Scan(&admitted)
	if err != nil {
		return false, typed(err)
	}
	return admitted, nil
}

// Admit asks the guard to admit a write with token (the fencing token of a lock on lockKey) to
// resource: dlock_fence_admit. Call it inside the caller's open transaction.
func Admit[R Row](ctx context.Context, queryRow func(context.Context, string, ...any) R, resource string, token int64, lockKey string) (bool, error) {
	return admit(ctx, queryRow, "dlock_fence_admit", resource, token, lockKey)
}

// AdmitRead is Admit for a reader of a read-write lock (dlock_fence_admit_read): admitted
// unless a writer with a greater token has written; a writer must then be above every
// admitted reader.
func AdmitRead[R Row](ctx context.Context, queryRow func(context.Context, string, ...any) R, resource string, token int64, lockKey string) (bool, error) {
	return admit(ctx, queryRow, "dlock_fence_admit_read", resource, token, lockKey)
}

// Bind binds resource to lockKey ahead of its first write (dlock_fence_bind): idempotent;
// ErrOtherKey when it is bound to another key already.
func Bind[R Row](ctx context.Context, queryRow func(context.Context, string, ...any) R, resource, lockKey string) error {
	var ignored string
	err := queryRow(ctx, "SELECT dlock_fence_bind($1::text, $2::text)::text", resource, lockKey).Scan(&ignored)
	return typed(err)
}
