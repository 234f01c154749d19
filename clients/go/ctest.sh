#!/bin/sh
# go test for CTest (tests/clients/CMakeLists.txt): ctest.sh GO unit|scenarios|guard
#   unit       the package's own tests (deadlines, errors, failover against a fake server)
#   scenarios  tests/clients/scenarios.json on DLOCK_CLIENT_BACKENDS (the runner reads
#              DLOCK_TEST_FILTER itself, a regular expression over <scenario>-<backend>)
#   guard      the fencing guard helper against real PostgreSQL (the module fence/pgtest)
# scripts/mutation-check puts a row's selection in DLOCK_TEST_FILTER; for the unit tests it is a
# go test -run expression, and one that runs no test prints "DLOCK_TEST_FILTER selected no test"
# and fails.
set -eu
cd "$(dirname "$0")"
go=$1
case $2 in
  unit) package=. ;;
  scenarios) exec "$go" test -count=1 -timeout 240s -v ./internal/scenario ;;
  guard) cd fence/pgtest && exec "$go" test -count=1 -timeout 280s -v . ;;
  *) echo "usage: ctest.sh GO unit|scenarios|guard" >&2; exit 2 ;;
esac
if [ -z "${DLOCK_TEST_FILTER:-}" ]; then
  exec "$go" test -count=1 -timeout 60s $package
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$go" test -count=1 -timeout 60s -v -run "$DLOCK_TEST_FILTER" "$package" >"$log" 2>&1 || status=$?
cat "$log"
if ! grep -q '^=== RUN' "$log"; then
  echo "DLOCK_TEST_FILTER selected no test"
  exit 1
fi
exit $status
