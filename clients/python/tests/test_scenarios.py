"""Every scenario of tests/clients/scenarios.json on each backend it names (and that
DLOCK_CLIENT_BACKENDS lists: comma-separated, default sqlite,pg,etcd)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from scenario_runner import ScenarioRun

SCENARIOS = pathlib.Path(
    os.environ.get(
        "DLOCK_CLIENT_SCENARIOS",
        pathlib.Path(__file__).resolve().parents[3] / "tests/clients/scenarios.json",
    )
)


def _cases():
    backends = os.environ.get("DLOCK_CLIENT_BACKENDS", "sqlite,pg,etcd").split(",")
    document = json.loads(SCENARIOS.read_text())
    assert document["format"] == 1, "this runner reads format 1 of the scenario list"
    for scenario in document["scenarios"]:
        for backend in scenario["backends"]:
            if backend in backends:
                yield pytest.param(scenario, backend, id=f"{scenario['name']}-{backend}")


@pytest.mark.parametrize("scenario,backend", list(_cases()))
def test_scenario(scenario, backend, harnesses, tmp_path):
    harness = harnesses(backend)
    run = ScenarioRun(harness, scenario, tmp_path)
    try:
        run.run()
    finally:
        try:
            harness.bring_back()  # first: closing sessions needs a server
        finally:
            run.close()
