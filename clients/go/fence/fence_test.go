package fence

import (
	"context"
	"errors"
	"testing"
)

type fakeRow struct {
	value bool
	err   error
}

func (r fakeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	*dest[0].(*bool) = r.value
	return nil
}

type pgError struct{ code string }

func (e *pgError) Error() string    { return "ERROR: " + e.code }
func (e *pgError) SQLState() string { return e.code }

// The driver-facing part without a database: the SQL called, and the SQLSTATEs' kinds. The
// rule itself runs against real PostgreSQL in fence/pgtest.
func TestAdmitCallsTheFunctionAndTypesItsErrors(t *testing.T) {
	var asked string
	query := func(answer fakeRow) func(context.Context, string, ...any) fakeRow {
		return func(_ context.Context, sql string, args ...any) fakeRow {
			asked = sql
			return answer
		}
	}
	if ok, err := Admit(context.Background(), query(fakeRow{value: true}), "r", 7, "k"); !ok || err != nil ||
		asked != "SELECT dlock_fence_admit($1::text, $2::bigint, $3::text)" {
		t.Fatalf("admit: %v %v %q", ok, err, asked)
	}
	if ok, err := AdmitRead(context.Background(), query(fakeRow{value: false}), "r", 7, "k"); ok || err != nil ||
		asked != "SELECT dlock_fence_admit_read($1::text, $2::bigint, $3::text)" {
		t.Fatalf("admit read: %v %v %q", ok, err, asked)
	}
	_, err := Admit(context.Background(), query(fakeRow{err: &pgError{"DL001"}}), "r", 7, "k")
	if !errors.Is(err, ErrOtherKey) || errors.Is(err, ErrBadArgument) {
		t.Fatalf("DL001: %v", err)
	}
	_, err = Admit(context.Background(), query(fakeRow{err: &pgError{"DL002"}}), "", 7, "k")
	if !errors.Is(err, ErrBadArgument) {
		t.Fatalf("DL002: %v", err)
	}
	other := &pgError{"40001"}
	if _, err = Admit(context.Background(), query(fakeRow{err: other}), "r", 7, "k"); err != other {
		t.Fatalf("another SQLSTATE is passed on: %v", err)
	}
}
