#!/usr/bin/env bash
# pip installs the Python client (clients/python) into a scratch directory, as a user would
# (`pip install clients/python`), and imports it from there alone: the package builds, carries
# its modules and needs nothing beyond the standard library.
#   check-python-install.sh PYTHON CLIENT_DIR
set -euo pipefail
python=$1
client=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/dlock-pyinstall-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The source tree is copied first: building in place would leave build/ and *.egg-info behind.
cp -r "$client" "$scratch/src"
rm -rf "$scratch/src/build" "$scratch/src"/*.egg-info "$scratch/src/src"/*.egg-info
# --no-build-isolation: the build backend is the test environment's pinned setuptools
# (tests/requirements.txt), so the check runs offline; --no-deps: there are none to fetch.
"$python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$scratch/site" "$scratch/src"
cd "$scratch"
PYTHONPATH="$scratch/site" PYTHONNOUSERSITE=1 "$python" -I -c '
import sys
sys.path.insert(0, sys.argv[1])
import dlock
assert dlock.__file__.startswith(sys.argv[1]), dlock.__file__
client = dlock.Client(["http://127.0.0.1:9"], retry_budget="0s")
assert client.servers == ["http://127.0.0.1:9"]
assert issubclass(dlock.NotLeader, dlock.Unavailable) and not issubclass(dlock.Unavailable, dlock.Held)
print("installed dlock", dlock.__version__, "from", dlock.__file__)
' "$scratch/site"
