"""Executes one scenario of tests/clients/scenarios.json with the Python client (the format is
tests/clients/README.md)."""

from __future__ import annotations

import os
import secrets
import threading
import time
import contextlib
from contextlib import contextmanager

import dlock
from dlock import duration_ms

ERRORS = {
    "held": dlock.Held,
    "lock_lost": dlock.LockLost,
    "session_not_found": dlock.SessionNotFound,
    "unavailable": dlock.Unavailable,  # also not_leader and unknown_outcome, its kinds
    "not_leader": dlock.NotLeader,
    "unknown_outcome": dlock.UnknownOutcome,
    "unauthenticated": dlock.Unauthenticated,
    "permission_denied": dlock.PermissionDenied,
    "conflict": dlock.Conflict,
    "invalid_argument": dlock.InvalidArgument,
    "too_many_requests": dlock.ResourceExhausted,
    "cancelled": dlock.Cancelled,
    "tls": dlock.TlsError,
}
BOGUS_TOKEN = "dlk_" + "A" * 43  # well-formed, known to no server


def seconds(value) -> float:
    return duration_ms(value) / 1000.0


@contextmanager
def environment(name: str, value: str):
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]


class Outcome:
    """What a step did: its value (a Lock, a LeaderInfo, None for held/none) or its error, and
    how long it took."""

    def __init__(self, value=None, error: BaseException | None = None, elapsed: float = 0.0):
        self.value, self.error, self.elapsed = value, error, elapsed


class Task:
    def __init__(self, step: dict, action):
        self.step = step
        self.cancel = threading.Event()
        self.outcome: Outcome | None = None
        self._thread = threading.Thread(target=self._run, args=(action,), daemon=True)
        self._thread.start()

    def _run(self, action):
        started = time.monotonic()
        try:
            value = action(self.cancel)
            self.outcome = Outcome(value, None, time.monotonic() - started)
        except BaseException as error:  # reported by the step that awaits it
            self.outcome = Outcome(None, error, time.monotonic() - started)

    def wait(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


class ScenarioRun:
    def __init__(self, harness, scenario: dict, tmp_path):
        self.harness = harness
        self.scenario = scenario
        self.tmp_path = tmp_path
        # Every key of this run lives in a namespace of its own: scenarios share the servers.
        self.ns = f"{scenario['name'][:40]}-{secrets.token_hex(4)}"
        self.names: dict[str, object] = {}
        self.tasks: dict[str, Task] = {}
        self.clients: list[dlock.Client] = []
        self.sessions: list[dlock.Session] = []

    def run(self) -> None:
        for number, step in enumerate(self.scenario["steps"], 1):
            handler = getattr(self, "do_" + step["do"], None)
            assert handler is not None, f"step {number}: unknown step {step['do']!r}"
            try:
                handler(step)
            except AssertionError as failure:
                raise AssertionError(f"step {number} {step}: {failure}") from None

    def close(self) -> None:
        for task in self.tasks.values():
            task.cancel.set()
        for session in self.sessions:
            session._stop.set()
        for session in self.sessions:
            try:
                session.close()
            except dlock.DlockError:
                pass
        for client in self.clients:
            client.close()

    # --- outcomes -------------------------------------------------------------------------

    def expect(self, step: dict, outcome: Outcome, default: dict) -> None:
        want = step.get("expect", default)
        error = outcome.error
        if "error" in want:
            kind = ERRORS[want["error"]]
            assert isinstance(error, kind), (
                f"expected error {want['error']}, got {error!r}" if error
                else f"expected error {want['error']}, got {outcome.value!r}")
            if "field" in want:
                assert error.field == want["field"], f"field {error.field!r}"
            if want.get("delayed"):
                assert getattr(error, "delayed_until", None), f"no lock-delay named: {error}"
            for text in want.get("message_excludes", []):
                assert text not in str(error), f"the message names {text!r}: {error}"
        elif error is not None:
            raise AssertionError(f"expected {want}, got error {error!r}") from error
        if want.get("granted"):
            assert outcome.value is not None, "expected a grant, got held"
        if want.get("held") or want.get("none"):
            assert outcome.value is None, f"expected none/held, got {outcome.value!r}"
        if "after_at_least" in want:
            least = seconds(want["after_at_least"])
            assert outcome.elapsed >= least, f"answered after {outcome.elapsed:.3f} s < {least} s"
        value = outcome.value
        for name in want.get("token_greater_than", []):
            assert value.token > self.names[name].token, (
                f"token {value.token} not greater than {name}'s {self.names[name].token}")
        if "token_of" in want:
            token = value.fencing_token if hasattr(value, "fencing_token") else value.token
            assert token == self.names[want["token_of"]].token, f"token {token}"
        if "cleared" in want:
            assert value == want["cleared"], f"cleared {value!r}"
        if "value" in want:
            assert value is not None and value.value == want["value"], f"value {value!r}"

    def outcome_of(self, step: dict, action, default: dict) -> None:
        """Runs ``action`` now (or in the background) and checks or records its outcome."""
        if step.get("background"):
            self.tasks[step["as"]] = Task(step, action)
            return
        started = time.monotonic()
        try:
            outcome = Outcome(action(None), None, time.monotonic() - started)
        except dlock.DlockError as error:
            outcome = Outcome(None, error, time.monotonic() - started)
        self.expect(step, outcome, default)
        if "as" in step and outcome.value is not None:
            self.names[step["as"]] = outcome.value

    # --- steps ----------------------------------------------------------------------------

    def do_client(self, step: dict) -> None:
        which = step.get("servers", "first")
        servers = {"first": self.harness.servers[:1], "all": self.harness.servers,
                   "auth": [self.harness.auth_server], "tls": [self.harness.tls_server]}[which]
        options = dict(namespace=self.ns, retry_budget=step.get("retry_budget", "5s"),
                       request_timeout="5s", backoff_max="500ms")
        tls = step.get("tls")
        if tls:
            files = self.harness.tls_files
            chosen = {"ca_file": files[tls["ca"]]}
            if tls.get("client_cert"):
                chosen.update(cert_file=files["client_cert"], key_file=files["client_key"])
            if tls.get("source", "option") == "option":
                options.update(chosen)
            else:  # the CLI's variables, read when the client is made
                names = {"ca_file": "DLOCK_CACERT", "cert_file": "DLOCK_CERT",
                         "key_file": "DLOCK_KEY"}
                with contextlib.ExitStack() as stack:
                    for option, path in chosen.items():
                        stack.enter_context(environment(names[option], path))
                    client = dlock.Client(servers, **options)
                self.clients.append(client)
                self.names[step["as"]] = client
                return
        if "clock_drift" in step:
            options["clock_drift"] = step["clock_drift"]
        if step.get("admin_token") == "admin":
            options["admin_token"] = self.harness.admin_token
        token = step.get("token")
        if token:
            token = BOGUS_TOKEN if token == "bogus" else self.harness.tokens[token]
        source = step.get("token_source", "option")
        path = self.tmp_path / f"token-{step['as']}"
        if token and source in ("file", "env_file"):
            path.write_text(token + "\n")
        if not token:
            client = dlock.Client(servers, **options)
        elif source == "option":
            client = dlock.Client(servers, token=token, **options)
        elif source == "file":
            client = dlock.Client(servers, token_file=str(path), **options)
        elif source == "env":
            with environment("DLOCK_TOKEN", token):
                client = dlock.Client(servers, **options)
        else:
            with environment("DLOCK_TOKEN_FILE", str(path)):
                client = dlock.Client(servers, **options)
        self.clients.append(client)
        self.names[step["as"]] = client

    def do_session(self, step: dict) -> None:
        client = self.names[step["client"]]

        def open_session(_cancel):
            session = client.session(step.get("owner"), ttl=step.get("ttl"),
                                     lock_delay=step.get("lock_delay", 0))
            self.sessions.append(session)
            return session

        self.outcome_of(step, open_session, {})

    def do_acquire(self, step: dict) -> None:
        session = self.names[step["session"]]
        options = dict(ttl=step.get("ttl"), wait=step.get("wait", 0),
                       auto_extend=step.get("auto_extend", True),
                       mode=step.get("mode", "exclusive"), permits=step.get("permits", 0),
                       session_bound=step.get("session_bound", False))
        if step.get("as"):
            self.names["started:" + step["as"]] = time.monotonic()

        def acquire(cancel):
            if step.get("form") == "with":
                with session.lock(step["key"], cancel=cancel, **options) as lock:
                    return lock
            return session.acquire(step["key"], cancel=cancel, **options)

        self.outcome_of(step, acquire, {"granted": True})

    def do_campaign(self, step: dict) -> None:
        session = self.names[step["session"]]

        def campaign(cancel):
            return session.campaign(step["name"], step["value"], wait=step.get("wait", 0),
                                    cancel=cancel)

        self.outcome_of(step, campaign, {"granted": True})

    def do_observe(self, step: dict) -> None:
        client = self.names[step["client"]]
        after = self.names[step["after"]]
        token, value = after.token, after.value

        def observe(cancel):
            return client.observe(step["name"], token, value, wait=step.get("wait", "10s"),
                                  cancel=cancel)

        self.outcome_of(step, observe, {})

    def do_leader(self, step: dict) -> None:
        client = self.names[step["client"]]
        self.outcome_of(step, lambda _cancel: client.leader(step["name"]), {})

    def do_proclaim(self, step: dict) -> None:
        leader = self.names[step["leader"]]
        self.outcome_of(step, lambda _cancel: leader.proclaim(step["value"]), {})

    def do_resign(self, step: dict) -> None:
        leader = self.names[step["leader"]]
        self.outcome_of(step, lambda _cancel: leader.resign(), {})

    def do_release(self, step: dict) -> None:
        lock = self.names[step["lock"]]
        self.outcome_of(step, lambda _cancel: lock.release(), {})

    def do_revoke(self, step: dict) -> None:
        client = self.names[step["client"]]
        self.outcome_of(step, lambda _cancel: client.revoke(step["key"]), {})

    def do_clear_delay(self, step: dict) -> None:
        client = self.names[step["client"]]
        self.outcome_of(step, lambda _cancel: client.clear_delay(step["key"]), {})

    def do_close(self, step: dict) -> None:
        session = self.names[step["session"]]
        self.outcome_of(step, lambda _cancel: session.close(), {})

    def do_await(self, step: dict) -> None:
        task = self.tasks[step["task"]]
        within = seconds(step["within"])
        assert task.wait(within), f"{step['task']} still pending after {within} s"
        self.expect(step, task.outcome, {"granted": True} if task.step["do"] in
                    ("acquire", "campaign") else {})
        if task.outcome.value is not None:
            self.names[step["task"]] = task.outcome.value

    def do_pending(self, step: dict) -> None:
        task = self.tasks[step["task"]]
        assert not task.wait(seconds(step["for"])), (
            f"{step['task']} finished early: {task.outcome.value!r} {task.outcome.error!r}")

    def do_cancel(self, step: dict) -> None:
        self.tasks[step["task"]].cancel.set()

    def do_read(self, step: dict) -> None:
        client = self.names[step["client"]]
        want = step.get("expect", {})
        end = time.monotonic() + seconds(step.get("within", 0))
        while True:
            try:
                holders = client.holders(step["key"])
                problem = None
                if want.get("free") and holders:
                    problem = f"held by token {holders[0].fencing_token}"
                if "holders" in want and len(holders) != want["holders"]:
                    problem = f"{len(holders)} holders"
                if "token_of" in want:
                    token = self.names[want["token_of"]].token
                    if token not in [h.fencing_token for h in holders]:
                        problem = f"tokens {[h.fencing_token for h in holders]}, not {token}"
            except dlock.DlockError as error:
                problem = repr(error)
            if problem is None:
                return
            assert time.monotonic() < end, problem
            time.sleep(0.05)

    def do_semaphore(self, step: dict) -> None:
        info = self.names[step["client"]].semaphore(step["name"])
        want = step["expect"]
        assert info.limit == want.get("limit", info.limit), f"limit {info.limit}"
        assert len(info.holders) == want.get("holders", len(info.holders)), info.holders

    def do_hold(self, step: dict) -> None:
        lock = self.names[step["lock"]]
        end = time.monotonic() + seconds(step["for"])
        while time.monotonic() < end:
            assert lock.valid and not lock.lost.is_set(), f"lost while held: {lock.lost_reason}"
            time.sleep(0.05)
        lock.check()

    def do_lost(self, step: dict) -> None:
        lock = self.names[step["lock"]]
        within = seconds(step["within"])
        assert lock.lost.wait(within), f"no lost signal within {within} s"
        assert not lock.valid, "lost but still valid"
        try:
            lock.check()
        except dlock.LockLost:
            return
        raise AssertionError("check() did not raise LockLost")

    def do_deadline(self, step: dict) -> None:
        lock = self.names[step["lock"]]
        trusted = lock.deadline - self.names["started:" + step["lock"]]
        low, high = seconds(step["at_least"]), seconds(step["at_most"])
        assert low <= trusted <= high, f"trusted for {trusted:.3f} s, not in [{low}, {high}]"

    def do_server(self, step: dict) -> None:
        server = step.get("server", "")
        self.harness.command(f"{step['command']} {server}".strip())
