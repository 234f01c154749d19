#!/bin/sh
# go test for CTest (tests/clients/CMakeLists.txt): ctest.sh GO unit|scenarios|guard
#   unit       the client's own tests (deadlines, errors, failover against a fake server) and
#              the guard helper's (package fence, no database)
#   scenarios  tests/clients/scenarios.json on DLOCK_CLIENT_BACKENDS (the runner reads
#              DLOCK_TEST_FILTER itself, a regular expression over <scenario>-<backend>)
#   guard      the guard helper against real PostgreSQL (fence/pgtest, a module of its own that
#              takes pgx from the Go module proxy on first use)
# scripts/mutation-check puts a row's selection in DLOCK_TEST_FILTER; for unit and guard it is a
# go test -run expression, and one that runs no test prints "DLOCK_TEST_FILTER selected no test"
# and fails.
set -eu
cd "$(dirname "$0")"
go=$1
case $2 in
  unit) package=". ./fence" ;;
  scenarios) exec "$go" test -count=1 -timeout 240s -v ./internal/scenario ;;
  guard) cd fence/pgtest && package=. ;;
  *) echo "usage: ctest.sh GO unit|scenarios|guard" >&2; exit 2 ;;
esac
if [ -z "${DLOCK_TEST_FILTER:-}" ]; then
  exec "$go" test -count=1 -timeout 120s $package
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$go" test -count=1 -timeout 120s -v -run "$DLOCK_TEST_FILTER" $package >"$log" 2>&1 || status=$?
cat "$log"
if ! grep -q '^=== RUN' "$log"; then
  echo "DLOCK_TEST_FILTER selected no test"
  exit 1
fi
exit $status
