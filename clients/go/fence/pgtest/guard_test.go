// Package pgtest tests the Go client's guard helper (clients/go/fence) against a real
// PostgreSQL with the guard's SQL installed from src/fencing/fencing_guard.sql. A module of its
// own, so that the driver (pgx) is a dependency of this test only, never of the client.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"dlock.dev/clients/go/fence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

func guardSQL(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	text, err := os.ReadFile(filepath.Join(filepath.Dir(file), "../../../../src/fencing/fencing_guard.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// setup: a PostgreSQL with the guard's functions and a ledger table to fence.
func setup(t *testing.T) (*postgres, *pgx.Conn) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	// The file's text, as psql -f would run it (the simple protocol takes several statements).
	if _, err := conn.PgConn().Exec(ctx, guardSQL(t)).ReadAll(); err != nil {
		t.Fatalf("installing fencing_guard.sql: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE ledger (token bigint, entry text)"); err != nil {
		t.Fatal(err)
	}
	return pg, conn
}

// write is the fenced write of the docs: admit, write, commit in one transaction; false and
// nothing written when stale.
func write(t *testing.T, conn *pgx.Conn, resource string, token int64, key, entry string) (bool, error) {
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	admitted, err := fence.Admit(ctx, tx.QueryRow, resource, token, key)
	if err != nil || !admitted {
		return false, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1, $2)", token, entry); err != nil {
		t.Fatal(err)
	}
	return true, tx.Commit(ctx)
}

func entries(t *testing.T, conn *pgx.Conn) int {
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM ledger").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGuardHelperAgainstPostgreSQL(t *testing.T) {
	pg, conn := setup(t)
	ctx := context.Background()
	must := func(t *testing.T, want bool, got bool, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("admitted %v (%v), want %v", got, err, want)
		}
	}

	t.Run("StaleWriterIsRefusedAndWritesNothing", func(t *testing.T) {
		ok, err := write(t, conn, "payouts", 100, "payouts/batch-17", "first")
		must(t, true, ok, err)
		ok, err = write(t, conn, "payouts", 100, "payouts/batch-17", "same token again")
		must(t, true, ok, err)
		ok, err = write(t, conn, "payouts", 99, "payouts/batch-17", "stale")
		must(t, false, ok, err)
		ok, err = write(t, conn, "payouts", 101, "payouts/batch-17", "next holder")
		must(t, true, ok, err)
		ok, err = write(t, conn, "payouts", 100, "payouts/batch-17", "the old holder, late")
		must(t, false, ok, err)
		if n := entries(t, conn); n != 3 {
			t.Fatalf("%d ledger entries, want 3 (no stale write)", n)
		}
	})

	t.Run("AnotherKeyIsATypedErrorNeverADecision", func(t *testing.T) {
		_, err := write(t, conn, "payouts", 500, "other/key", "wrong key")
		if !errors.Is(err, fence.ErrOtherKey) {
			t.Fatalf("another key: %v", err)
		}
		if err := fence.Bind(ctx, conn.QueryRow, "reports", "reports/daily"); err != nil {
			t.Fatal(err)
		}
		if err := fence.Bind(ctx, conn.QueryRow, "reports", "reports/daily"); err != nil {
			t.Fatalf("bind again: %v", err)
		}
		if err := fence.Bind(ctx, conn.QueryRow, "reports", "other/key"); !errors.Is(err, fence.ErrOtherKey) {
			t.Fatalf("bind to another key: %v", err)
		}
		if _, err := write(t, conn, "reports", 1, "other/key", "x"); !errors.Is(err, fence.ErrOtherKey) {
			t.Fatalf("a write with another key to a bound resource: %v", err)
		}
	})

	t.Run("BadArgumentsAreTyped", func(t *testing.T) {
		for _, c := range []struct {
			resource, key string
			token         int64
		}{{"", "k", 1}, {"r", "", 1}, {"r", "k", 0}, {"r", "k", -5}} {
			if _, err := write(t, conn, c.resource, c.token, c.key, "x"); !errors.Is(err, fence.ErrBadArgument) {
				t.Errorf("%+v: %v", c, err)
			}
		}
	})

	t.Run("AWriterMustBeAboveEveryAdmittedReader", func(t *testing.T) {
		read := func(token int64) bool {
			t.Helper()
			ok, err := fence.AdmitRead(ctx, conn.QueryRow, "report", token, "report")
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !read(20) || !read(15) {
			t.Fatal("readers are admitted in any order")
		}
		ok, err := write(t, conn, "report", 19, "report", "writer below a reader")
		must(t, false, ok, err)
		ok, err = write(t, conn, "report", 21, "report", "writer above every reader")
		must(t, true, ok, err)
		if read(20) {
			t.Fatal("a reader below an admitted writer was admitted")
		}
	})

	t.Run("TheRowStaysLockedUntilTheTransactionEnds", func(t *testing.T) {
		first, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Rollback(ctx)
		ok, err := fence.Admit(ctx, first.QueryRow, "payouts", 200, "payouts/batch-17")
		must(t, true, ok, err)
		other, err := pgx.Connect(ctx, pg.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		if _, err := other.Exec(ctx, "SET lock_timeout = '300ms'"); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		if _, err := fence.Admit(ctx, other.QueryRow, "payouts", 201, "payouts/batch-17"); err == nil {
			t.Fatal("a second admit of the same resource went through while the first was open")
		}
		if time.Since(started) < 250*time.Millisecond {
			t.Fatalf("refused after %v: not by the row lock", time.Since(started))
		}
	})

	t.Run("DatabaseSQL", func(t *testing.T) {
		config, err := pgx.ParseConfig(pg.URL)
		if err != nil {
			t.Fatal(err)
		}
		db := stdlib.OpenDB(*config)
		defer db.Close()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		ok, err := fence.Admit(ctx, tx.QueryRowContext, "payouts", 90, "payouts/batch-17")
		must(t, false, ok, err) // below 101, the highest committed
		ok, err = fence.Admit(ctx, tx.QueryRowContext, "payouts", 150, "payouts/batch-17")
		must(t, true, ok, err)
	})
}
