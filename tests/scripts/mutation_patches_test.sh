#!/usr/bin/env bash
# scripts/mutation-check's patches survive refactors: a mutation still applies when the code
# around it moves (GNU patch's offset) or its context lines change (three-way merge from the file
# it was made against), --refresh rebases it, and it stops applying only when the lines it
# changes are changed. Runs the real script in a throwaway repository.
set -euo pipefail
source_root=$(cd "$(dirname "$0")/../.." && pwd)
repo=$(mktemp -d "${TMPDIR:-/tmp}/dlock-mutation-patches-XXXXXX")
trap 'rm -rf "$repo"' EXIT
cd "$repo"
git init -q && git config user.email test@dlock && git config user.name test
mkdir -p scripts/mutations src
cp "$source_root/scripts/mutation-check" scripts/
echo 'demo|target|binary|filter|1' > scripts/mutations-demo.table
cat > src/queue.cc <<'CODE'
int head(const Queue& q) {
  if (q.empty()) return -1;
  return q.front();
}

int pop(Queue& q) {
  // The oldest item.
  const int item = q.front();
  q.pop_front();
  return item;
}
CODE
git add -A && git commit -qm base
sed -i -e 's/return q.front();/return q.back();/' -e 's/item = q.front();/item = q.back();/' src/queue.cc
git diff --full-index > scripts/mutations/demo.patch
git checkout -q src/queue.cc
git add -A && git commit -qm mutation

fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect STATUS PATTERN: --apply-only exits STATUS and prints PATTERN
  local out status=0
  out=$(scripts/mutation-check --apply-only 2>&1) || status=$?
  [ "$status" = "$1" ] || fail "exit $status, want $1: $out"
  grep -q "$2" <<< "$out" || fail "no '$2' in: $out"
}

expect 0 "1 mutations checked, 0 no longer apply, 0 apply only"

# Code added above: the hunk is found at an offset.
{ printf '// header\n%.0s' {1..20}; cat src/queue.cc; } > src/new && mv src/new src/queue.cc
git commit -qam "code above"
expect 0 "applies by offset: demo"

# A line between the two changed lines, inside the hunk, changed: GNU patch's fuzz only forgives
# a hunk's outer context, so it cannot place it; the three-way merge can.
sed -i 's/^int pop(Queue& q) {$/int pop(Queue\& queue) {/' src/queue.cc
git commit -qam "context changed"
expect 0 "applies by merge: demo"

# --refresh rebases the patch on today's file; it then applies exactly.
scripts/mutation-check --refresh > /dev/null
grep -q '^-  return q.front();' scripts/mutations/demo.patch || fail "refreshed patch lost its change"
expect 0 "0 apply only with an offset or a merge"
git commit -qam refresh

# The mutated line itself changed: the mutation no longer applies, and says why.
sed -i 's/return q.front();/return q.first();/' src/queue.cc
git commit -qam "mutated line changed"
expect 1 "DOES NOT APPLY: demo: conflicts in src/queue.cc"
echo "mutation patches: ok"
