#!/usr/bin/env bash
# The Java client's tests for CTest (tests/clients/CMakeLists.txt), built out of the tree:
#   run-tests.sh BUILD_DIR build              compile, and fetch from Maven Central what the pom
#                                             pins (once: ~/.m2 keeps it); runs one smoke test
#   run-tests.sh BUILD_DIR unit               the unit tests, offline
#   run-tests.sh BUILD_DIR scenarios BACKEND  the scenario list on one backend, offline
#   run-tests.sh BUILD_DIR guard              the fencing guard against a real PostgreSQL, offline
# DLOCK_TEST_FILTER: unit and guard, a surefire -Dtest pattern (e.g. LeaseTest or ErrorsTest#outage*);
# scenarios, comma-separated substrings of <scenario>-<backend>. Selecting nothing prints
# "DLOCK_TEST_FILTER selected no test" and fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
mode=$2
# The client reads DLOCK_* variables: a developer's shell must not leak in.
for name in $(compgen -e); do
  case $name in
    DLOCK_CLIENT_* | DLOCK_TEST_*) ;;
    DLOCK_*) unset "$name" ;;
  esac
done
# Maven's own JVM: the quick JIT tier alone, one GC thread (a short run on a shared machine).
export MAVEN_OPTS="${MAVEN_OPTS:-} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
mvn=(mvn -q -B -Dstyle.color=never -f "$here/pom.xml" "-Ddlock.buildDir=$build")
# Maven's colour resets even in batch mode: stripped, so each line starts with its text.
plain() { sed -u 's/\x1b\[[0-9;]*m//g'; }
case $mode in
  build)
    "${mvn[@]}" test "-Ddlock.reportsDir=$build/reports-build" -Dtest=BuildSmokeTest \
      -Dsurefire.failIfNoSpecifiedTests=false 2>&1 | plain
    exit
    ;;
  unit)
    args=("-Ddlock.reportsDir=$build/reports-unit")
    ;;
  scenarios)
    export DLOCK_CLIENT_BACKENDS=$3
    args=("-Ddlock.reportsDir=$build/reports-$3" -Ddlock.excludedGroups=none -Dtest=ScenarioTest)
    ;;
  guard)
    args=("-Ddlock.reportsDir=$build/reports-guard" -Ddlock.excludedGroups=none -Dtest=FenceGuardTest)
    ;;
  *)
    echo "run-tests.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
if [ -n "${DLOCK_TEST_FILTER:-}" ] && [ "$mode" != scenarios ]; then
  args+=("-Dtest=$DLOCK_TEST_FILTER")
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"${mvn[@]}" -o surefire:test "${args[@]}" 2>&1 | plain | tee "$log" || status=$?
if [ $status -ne 0 ] && grep -qE "No tests matching pattern|DLOCK_TEST_FILTER selected no" "$log"; then
  echo "DLOCK_TEST_FILTER selected no test"
fi
exit $status
