"""What Client, Session and Lock share: resolved options, the servers, the retry loop with
failover, and one function per C3 route."""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable

from . import errors
from ._lease import backoff_delay, resolve_clock_drift, trusted_ttl_ms
from ._transport import MAYBE_SENT, TLS_FAILED, Response, Transport, TransportError
from ._transport import make_tls_context

DEFAULT_SERVER = "http://127.0.0.1:7070"
TRANSIENT = (429, 502, 503, 504)
_BEARER = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _check_bearer(token: str, name: str) -> str:
    if not _BEARER.match(token):
        raise errors.InvalidArgument(
            f"{name}: not a bearer token (letters, digits and -._~+/, then optional '=' "
            "padding; e.g. from dlock token new)",
            field=name,
        )
    return token


def _read_token_file(path: str, name: str) -> str:
    """The first line of ``path``, trailing blanks removed; errors name the file, never a token."""
    try:
        with open(path, encoding="utf-8") as file:
            line = file.readline().rstrip()
    except OSError as error:
        raise errors.InvalidArgument(
            f"{name}: cannot read a token from {path!r}: {error.strerror}", field=name
        ) from None
    if not line:
        raise errors.InvalidArgument(f"{name}: the first line of {path!r} is empty", field=name)
    return _check_bearer(line, f"{name} ({path!r})")


def resolve_token(token: str | None, token_file: str | None) -> str:
    """The option, else the first line of token_file, else DLOCK_TOKEN, else the first line of
    the file DLOCK_TOKEN_FILE names; "" when none is set (contract C6, as the CLI)."""
    if token:
        return _check_bearer(token, "token")
    if token_file:
        return _read_token_file(token_file, "token_file")
    if env := _env("DLOCK_TOKEN"):
        return _check_bearer(env, "DLOCK_TOKEN")
    if path := _env("DLOCK_TOKEN_FILE"):
        return _read_token_file(path, "DLOCK_TOKEN_FILE")
    return ""


def resolve_servers(servers) -> list[str]:
    """A list, or a comma-separated string; empty: DLOCK_SERVER, else the default."""
    if isinstance(servers, str):
        servers = servers.split(",")
    listed = [s.strip() for s in (servers or []) if s and s.strip()]
    if not listed:
        listed = [s.strip() for s in (_env("DLOCK_SERVER") or DEFAULT_SERVER).split(",")]
        listed = [s for s in listed if s]
    if not listed:
        raise errors.InvalidArgument("server: no server URL given", field="server")
    return listed


def quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def query(**params) -> str:
    pairs = [(k, str(v)) for k, v in params.items() if v is not None and v != ""]
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


@dataclass
class Exchange:
    status: int
    body: bytes
    sent_at: float  # monotonic time the answered request was sent

    def json(self, what: str) -> dict:
        try:
            value = json.loads(self.body)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise errors.Internal(f"{what}: the server's answer is not a JSON object")
        return value


@dataclass
class Call:
    """One call's bounds: a monotonic deadline for it and its retries, and events that end it."""

    deadline: float
    stop: threading.Event | None = None  # a background thread shutting down: give up quietly
    cancel: threading.Event | None = None  # the caller's cancellation: raise Cancelled
    repeat_safe: bool = True  # may be sent again after an unknown outcome (docs/client.md)
    slack: float = 0.0  # seconds the server may legitimately hold the request (a wait)
    # Called before each attempt: returns (body, slack) for it (a waiting acquire asks only
    # for what is left of its wait).
    before_attempt: Callable[[], tuple[bytes, float]] | None = None


class Core:
    def __init__(
        self,
        servers,
        token,
        token_file,
        admin_token,
        ca_file,
        cert_file,
        key_file,
        clock_drift,
        request_timeout,
        retry_budget,
        backoff_initial,
        backoff_max,
        namespace,
    ):
        self.servers = resolve_servers(servers)
        self.token = resolve_token(token, token_file)
        admin = admin_token or _env("DLOCK_ADMIN_TOKEN")
        self.admin_token = _check_bearer(admin, "admin_token") if admin else ""
        self.clock_drift = resolve_clock_drift(clock_drift)
        self.request_timeout = float(request_timeout)
        self.retry_budget = float(retry_budget)
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.namespace = namespace if namespace is not None else _env("DLOCK_NAMESPACE")
        tls = None
        if any(url.strip().lower().startswith("https://") for url in self.servers):
            tls = make_tls_context(
                ca_file or _env("DLOCK_CACERT"),
                cert_file or _env("DLOCK_CERT"),
                key_file or _env("DLOCK_KEY") or None,
            )
        self.transports = [Transport(url, tls) for url in self.servers]
        self._current = 0
        self._current_mutex = threading.Lock()
        self._random = random.Random()

    def close(self) -> None:
        for transport in self.transports:
            transport.close()

    def call_for(self, budget: float | None = None, **kwargs) -> Call:
        return Call(time.monotonic() + (self.retry_budget if budget is None else budget), **kwargs)

    def ns(self, ns: str | None) -> str:
        return ns if ns is not None else self.namespace

    # --- the retry loop -------------------------------------------------------------------

    def call(
        self,
        method: str,
        target: str,
        body: dict | None,
        what: str,
        call: Call,
        authorization: str | None = None,
    ) -> Exchange:
        """Sends the request, retrying transient failures (unreachable, 429/502/503/504) with
        backoff until ``call.deadline``; returns the first other answer, whatever its status.
        An unreachable server, a 502/503/504 or a lost connection hands the call to the next
        server at once (until each was tried; then backoff). A lost connection ends a call that
        is not repeat-safe with UnknownOutcome at once."""
        headers = {}
        bearer = authorization or self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        data = json.dumps(body).encode() if body is not None else None
        started = time.monotonic()
        failure: Exception | None = None
        failed_in_round = 0
        backoff_round = 0
        attempts = 0
        count = len(self.transports)
        while True:
            attempts += 1
            slack = call.slack
            if call.before_attempt is not None:
                data, slack = call.before_attempt()
            sent_at = time.monotonic()
            # Every call gets at least one real attempt, even with its deadline already due.
            timeout = min(max(call.deadline - sent_at, 0.001), self.request_timeout + slack)
            server = self._current % count
            retry_after = None
            try:
                response: Response = self.transports[server].send(
                    method, target, data, headers, timeout, call.cancel
                )
                if response.status not in TRANSIENT:
                    return Exchange(response.status, response.body, sent_at)
                failure = errors.error_from_response(response.status, response.body, what)
                retry_after = response.retry_after
                move_on = response.status != 429  # 429 is this server's own limit: stay
            except TransportError as error:
                failure = error
                move_on = True
                if error.kind == MAYBE_SENT and not call.repeat_safe:
                    self._give_up(failure, what, attempts, started)
                if error.kind == TLS_FAILED and count == 1:
                    self._give_up(failure, what, attempts, started)
            now = time.monotonic()
            if move_on and count > 1:
                with self._current_mutex:
                    if self._current % count == server:  # only the first thread moves on
                        self._current = (server + 1) % count
                failed_in_round += 1
                if failed_in_round < count:
                    if now >= call.deadline:
                        self._give_up(failure, what, attempts, started)
                    continue
                failed_in_round = 0
                if isinstance(failure, TransportError) and failure.kind == TLS_FAILED:
                    self._give_up(failure, what, attempts, started)
            delay = backoff_delay(
                self.backoff_initial, self.backoff_max, backoff_round, self._random.random()
            )
            backoff_round += 1
            if retry_after is not None:
                delay = max(delay, retry_after)
            if now + delay >= call.deadline:
                self._give_up(failure, what, attempts, started)
            self._pause(delay, call, what)

    @staticmethod
    def _pause(delay: float, call: Call, what: str) -> None:
        """Waits ``delay`` seconds unless the call is cancelled or stopped first."""
        end = time.monotonic() + delay
        while (left := end - time.monotonic()) > 0:
            if call.cancel is not None and call.cancel.is_set():
                raise errors.Cancelled(f"{what}: cancelled")
            if call.stop is not None and call.stop.is_set():
                raise errors.Cancelled(f"{what}: stopped")
            time.sleep(min(left, 0.05))

    @staticmethod
    def _give_up(failure, what: str, attempts: int, started: float):
        spent = time.monotonic() - started
        plural = "s" if attempts != 1 else ""
        suffix = f" (gave up after {attempts} attempt{plural} in {spent:.1f} s)"
        if isinstance(failure, errors.DlockError):
            failure.args = (str(failure) + suffix,)
            failure.message = str(failure)
            raise failure
        message = f"{what}: {failure}{suffix}"
        if isinstance(failure, TransportError) and failure.kind == TLS_FAILED:
            raise errors.TlsError(message, field="tls")
        if isinstance(failure, TransportError) and failure.kind == MAYBE_SENT:
            raise errors.UnknownOutcome(message)
        raise errors.Unavailable(message)

    def expect(self, exchange: Exchange, status: int, what: str, key: str = "") -> None:
        if exchange.status != status:
            raise errors.error_from_response(exchange.status, exchange.body, what, key)

    # --- routes ---------------------------------------------------------------------------

    def open_session(self, owner: str, ttl_ms: int, lock_delay_ms: int, call: Call):
        body = {"owner": owner}
        if ttl_ms > 0:
            body["ttl_ms"] = ttl_ms
        if lock_delay_ms > 0:
            body["lock_delay_ms"] = lock_delay_ms
        call.repeat_safe = False  # a repeat would open a second session
        exchange = self.call("POST", "/v1/sessions", body, "open session", call)
        self.expect(exchange, 201, "open session")
        answer = exchange.json("open session")
        if not answer.get("session_id"):
            raise errors.Internal("open session: the server sent no session_id")
        return answer, exchange.sent_at

    def keepalive(self, session_id: str, call: Call):
        what = f"keepalive session {session_id}"
        target = f"/v1/sessions/{quote(session_id)}/keepalive"
        exchange = self.call("POST", target, None, what, call)
        self.expect(exchange, 200, what)
        return exchange.json(what), exchange.sent_at

    def close_session(self, session_id: str, call: Call) -> None:
        what = f"close session {session_id}"
        exchange = self.call("DELETE", f"/v1/sessions/{quote(session_id)}", None, what, call)
        self.expect(exchange, 204, what)

    def acquire(self, key, session_id, *, ttl_ms, session_bound, wait_ms, ns, mode, limit,
                leader_value, call: Call):
        """The grant's answer and its send time; raises Held when still held after ``wait_ms``
        (with the lock-delay's end when the server named one)."""
        campaign = leader_value is not None
        what = ("campaign " if campaign else "acquire ") + key
        if campaign:
            target = f"/v1/elections/{quote(key)}/campaign"
        elif mode == "permit":
            target = f"/v1/semaphores/{quote(key)}/acquire"
        else:
            target = f"/v1/locks/{quote(key)}/acquire"
        target += query(ns=self.ns(ns))
        wait_until = time.monotonic() + wait_ms / 1000.0
        asked_wait = [0]

        def before_attempt():
            # Recomputed before every attempt: retries after a 503 never wait past our deadline.
            asked_wait[0] = max(0, int((wait_until - time.monotonic()) * 1000))
            body: dict = {"session_id": session_id}
            if campaign:
                body["value"] = leader_value
            else:
                if session_bound:
                    body["lease"] = "session"
                if ttl_ms > 0:
                    body["ttl_ms"] = ttl_ms
                if mode == "shared":
                    body["mode"] = "shared"
                if mode == "permit":
                    body["limit"] = limit
            if asked_wait[0] > 0:
                body["wait_ms"] = asked_wait[0]
            return json.dumps(body).encode(), asked_wait[0] / 1000.0

        call.before_attempt = before_attempt
        round_ = 0
        while True:
            exchange = self.call("POST", target, None, what, call)
            if exchange.status == 200:
                answer = exchange.json(what)
                answer["trusted_ttl_ms"] = trusted_ttl_ms(ttl_ms, int(answer.get("ttl_ms") or 0))
                return answer, exchange.sent_at
            code, _, _ = errors.parse_error_body(exchange.body)
            if exchange.status != 409 or code != "held":
                raise errors.error_from_response(exchange.status, exchange.body, what, key)
            # Held. The server may cap the wait below ours: keep asking until ours is spent.
            left = wait_until - time.monotonic()
            if left <= 0.02:
                raise errors.Held(key, wait_ms / 1000,
                                  errors.error_object(exchange.body).get("delayed_until"))
            if time.monotonic() - exchange.sent_at < asked_wait[0] / 2000.0:
                # Answered early without waiting: pace the retries instead of spinning.
                pause = min(left, backoff_delay(self.backoff_initial, self.backoff_max, round_,
                                                self._random.random()))
                round_ += 1
                self._pause(pause, call, what)

    def extend(self, key, session_id, token, ttl_ms, ns, mode, call: Call):
        what = f"extend {key}"
        collection = "semaphores" if mode == "permit" else "locks"
        body = {"session_id": session_id, "fencing_token": token}
        if ttl_ms > 0:
            body["ttl_ms"] = ttl_ms
        target = f"/v1/{collection}/{quote(key)}/extend" + query(ns=self.ns(ns))
        exchange = self.call("POST", target, body, what, call)
        self.expect(exchange, 200, what, key)
        answer = exchange.json(what)
        if answer.get("fencing_token") != token:
            # Extend never changes the token: another one means another grant.
            raise errors.LockLost(
                f"{what}: the server answered token {answer.get('fencing_token')}, ours is {token}"
            )
        answer["trusted_ttl_ms"] = trusted_ttl_ms(ttl_ms, int(answer.get("ttl_ms") or 0))
        return answer, exchange.sent_at

    def release(self, key, session_id, token, ns, mode, call: Call) -> None:
        what = f"release {key}"
        collection = "semaphores" if mode == "permit" else "locks"
        target = f"/v1/{collection}/{quote(key)}" + query(
            session_id=session_id, fencing_token=token, ns=self.ns(ns)
        )
        self.expect(self.call("DELETE", target, None, what, call), 204, what, key)

    def get(self, path: str, what: str, call: Call, none_code: str) -> dict | None:
        """GET ``path``: its object, or None on 404 with ``none_code``."""
        exchange = self.call("GET", path, None, what, call)
        if exchange.status == 404:
            code, _, _ = errors.parse_error_body(exchange.body)
            if code == none_code:
                return None
        self.expect(exchange, 200, what)
        return exchange.json(what)

    def proclaim(self, name, session_id, token, value, ns, call: Call) -> dict:
        what = f"proclaim {name}"
        body = {"session_id": session_id, "fencing_token": token, "value": value}
        target = f"/v1/elections/{quote(name)}/proclaim" + query(ns=self.ns(ns))
        exchange = self.call("POST", target, body, what, call)
        self.expect(exchange, 200, what, name)
        answer = exchange.json(what)
        if answer.get("fencing_token") != token:
            raise errors.LockLost(f"{what}: the server answered another token")
        return answer

    def resign(self, name, session_id, token, ns, call: Call) -> None:
        what = f"resign {name}"
        body = {"session_id": session_id, "fencing_token": token}
        exchange = self.call(
            "POST", f"/v1/elections/{quote(name)}/resign" + query(ns=self.ns(ns)), body, what, call
        )
        self.expect(exchange, 204, what, name)

    def clear_delay(self, key, ns, call: Call) -> bool:
        what = f"clear the lock-delay of {key}"
        call.repeat_safe = False  # a repeat could end a delay that started after the first
        exchange = self.call(
            "POST", f"/v1/admin/locks/{quote(key)}/clear-delay" + query(ns=self.ns(ns)), None,
            what, call, authorization=self.admin_token or None,
        )
        self.expect(exchange, 200, what, key)
        return bool(exchange.json(what).get("cleared"))

    def revoke(self, key, ns, call: Call) -> dict:
        what = f"revoke {key}"
        call.repeat_safe = False  # a repeat could revoke a grant made after the first revoke
        exchange = self.call(
            "POST", f"/v1/admin/locks/{quote(key)}/revoke" + query(ns=self.ns(ns)), None, what,
            call, authorization=self.admin_token or None,
        )
        self.expect(exchange, 200, what, key)
        return exchange.json(what)
