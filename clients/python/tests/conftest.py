"""The scenario list (tests/clients/scenarios.json) over the backends of DLOCK_CLIENT_BACKENDS,
each against one harness (tests/clients/harness.cc) started once per backend."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))
# The package from this tree, whatever is installed (CTest sets PYTHONPATH too).
sys.path.insert(0, str(HERE.parent / "src"))

# The environment variables the client reads must not leak from the shell into the tests.
for name in list(os.environ):
    if name.startswith("DLOCK_") and not name.startswith(("DLOCK_CLIENT_", "DLOCK_TEST_")):
        del os.environ[name]


def pytest_configure(config):
    # scripts/mutation-check runs one row's test through CTest with DLOCK_TEST_FILTER: the
    # selection, as pytest -k would take it.
    selection = os.environ.get("DLOCK_TEST_FILTER", "")
    if selection and not config.option.keyword:
        config.option.keyword = selection


@pytest.fixture(scope="session")
def harnesses():
    from harness import Harness

    binary = os.environ.get("DLOCK_CLIENT_HARNESS",
                            str(ROOT / "build/tests/clients/dlock_client_harness"))
    started: dict[str, Harness] = {}

    def get(backend: str) -> Harness:
        if backend not in started:
            if not os.path.exists(binary):
                pytest.skip(f"no harness at {binary} (build dlock_client_harness)")
            started[backend] = Harness(binary, backend)
        return started[backend]

    yield get
    for harness in started.values():
        harness.close()


def pytest_collection_finish(session):
    if os.environ.get("DLOCK_TEST_FILTER") and not session.items:
        # scripts/mutation-check reads this line: a row whose filter matches nothing is broken,
        # not caught.
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line("DLOCK_TEST_FILTER selected no test")
