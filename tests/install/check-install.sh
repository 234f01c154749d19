#!/usr/bin/env bash
# Installs a built tree into a temporary prefix (`cmake --install`), builds a program from
# outside the source tree against that prefix twice (find_package(dlock CONFIG) and
# pkg-config), and runs both against the installed dlockd (sqlite in a temporary directory,
# a free loopback port): each acquires and releases a lock.
#   tests/install/check-install.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: check-install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix=$work/prefix
echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for file in sbin/dlockd bin/dlock include/dlock/client.h include/dlock/errors.h \
    include/dlock/types.h; do
  [ -e "$prefix/$file" ] || fail "$file is not installed"
done
libdir=$(dirname "$(find "$prefix" -name libdlock_client.a | head -1)")
[ -n "$libdir" ] || fail "libdlock_client.a is not installed"
[ -f "$libdir/cmake/dlock/dlockConfig.cmake" ] || fail "dlockConfig.cmake is not installed"
[ -f "$libdir/pkgconfig/dlock.pc" ] || fail "dlock.pc is not installed"
grep -q "^prefix=$prefix\$" "$libdir/pkgconfig/dlock.pc" || fail "dlock.pc does not name $prefix"

# The consumer is copied out of the source tree so nothing can reach the project's headers.
mkdir "$work/src"
cp "$here/consumer.cc" "$here/CMakeLists.txt" "$work/src/"

echo "== consumer through find_package(dlock CONFIG)"
cmake -S "$work/src" -B "$work/cmake-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
ninja -C "$work/cmake-build" >"$work/ninja.log" || { cat "$work/ninja.log"; exit 1; }

echo "== consumer through pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs dlock)
echo "pkg-config --cflags --libs dlock: $flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -O1 -o "$work/consumer-pc" "$work/src/consumer.cc" $flags

echo "== installed dlockd"
mkdir "$work/state"
"$prefix/sbin/dlockd" --server-listen 127.0.0.1:0 --sqlite-path "$work/state/dlock.db" \
  --server-ready-file "$work/ready" --log-level warn &
daemon=$!
deadline=$(( $(date +%s) + 30 ))
until [ -s "$work/ready" ]; do
  kill -0 "$daemon" 2>/dev/null || fail "dlockd exited before listening"
  [ "$(date +%s)" -lt "$deadline" ] || fail "dlockd did not listen within 30 s"
  sleep 0.05
done
url="http://$(head -1 "$work/ready")"
echo "dlockd listens on $url"

"$work/cmake-build/consumer" "$url"
"$work/consumer-pc" "$url"
"$prefix/bin/dlock" --server "$url" list >/dev/null
echo "PASS: installed prefix builds and runs a client (CMake and pkg-config)"
