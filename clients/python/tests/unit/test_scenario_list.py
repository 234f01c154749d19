"""The shared scenario list (tests/clients/scenarios.json) is well-formed: every step kind and
argument is one tests/clients/README.md defines, every name is bound before it is used. A typo
in an argument would otherwise be ignored by every runner, and the scenario silently weaker."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

PATH = pathlib.Path(os.environ.get(
    "DLOCK_CLIENT_SCENARIOS",
    pathlib.Path(__file__).resolve().parents[4] / "tests/clients/scenarios.json"))

COMMON = {"do", "as", "expect", "background"}
STEPS = {
    "client": {"servers", "token", "token_source", "admin_token", "clock_drift", "retry_budget",
               "tls"},
    "session": {"client", "ttl", "owner", "lock_delay"},
    "acquire": {"session", "key", "ttl", "wait", "mode", "permits", "auto_extend",
                "session_bound", "form"},
    "await": {"task", "within"},
    "pending": {"task", "for"},
    "cancel": {"task"},
    "release": {"lock"},
    "read": {"client", "key", "within"},
    "hold": {"lock", "for"},
    "lost": {"lock", "within"},
    "deadline": {"lock", "at_least", "at_most"},
    "revoke": {"client", "key"},
    "clear_delay": {"client", "key"},
    "campaign": {"session", "name", "value", "wait"},
    "proclaim": {"leader", "value"},
    "resign": {"leader"},
    "leader": {"client", "name"},
    "observe": {"client", "name", "after", "wait"},
    "semaphore": {"client", "name"},
    "close": {"session"},
    "server": {"command", "server"},
}
EXPECT = {"granted", "held", "none", "error", "field", "message_excludes", "delayed",
          "after_at_least", "token_greater_than", "token_of", "value", "free", "holders", "limit",
          "cleared"}
ERRORS = {"held", "lock_lost", "session_not_found", "unavailable", "not_leader",
          "unknown_outcome", "unauthenticated", "permission_denied", "conflict",
          "invalid_argument", "too_many_requests", "cancelled", "tls"}
COMMANDS = {"kill9", "stop", "start", "restart", "backend_stop", "backend_start"}
# Arguments that name something an earlier step bound.
REFERENCES = ("client", "session", "lock", "task", "leader", "after")

DOCUMENT = json.loads(PATH.read_text())


def test_the_format_is_one():
    assert DOCUMENT["format"] == 1


def test_scenario_names_are_unique_and_usable_in_a_namespace():
    names = [scenario["name"] for scenario in DOCUMENT["scenarios"]]
    assert len(names) == len(set(names))
    for name in names:
        assert name.replace("_", "").isalnum() and name.islower(), name


@pytest.mark.parametrize("scenario", DOCUMENT["scenarios"], ids=lambda s: s["name"])
def test_every_step_is_defined_and_every_name_bound_first(scenario):
    assert set(scenario) == {"name", "doc", "backends", "steps"}
    assert scenario["backends"] and set(scenario["backends"]) <= {"sqlite", "pg", "etcd"}
    bound: set[str] = set()
    for number, step in enumerate(scenario["steps"], 1):
        where = f"step {number} {step}"
        kind = step["do"]
        assert kind in STEPS, where
        unknown = set(step) - COMMON - STEPS[kind]
        assert not unknown, f"{where}: unknown {unknown}"
        for argument in REFERENCES:
            if argument in step and not (kind == "server" and argument == "server"):
                assert step[argument] in bound, f"{where}: {step[argument]!r} is not bound yet"
        expect = step.get("expect", {})
        assert set(expect) <= EXPECT, f"{where}: unknown {set(expect) - EXPECT}"
        if "error" in expect:
            assert expect["error"] in ERRORS, where
        for name in expect.get("token_greater_than", []) + (
                [expect["token_of"]] if "token_of" in expect else []):
            assert name in bound, f"{where}: {name!r} is not bound yet"
        if kind == "server":
            assert step["command"] in COMMANDS, where
            if not step["command"].startswith("backend_"):
                assert step.get("server") in (0, 1, "auth"), where
            else:
                assert set(scenario["backends"]) <= {"pg", "etcd"}, f"{where}: not on sqlite"
        if kind == "client" and step.get("servers") == "all" or (
                kind == "server" and step.get("server") == 1):
            assert "sqlite" not in scenario["backends"], f"{where}: sqlite has one plain server"
        if "as" in step:
            bound.add(step["as"])
