"""Typed errors of the dlock client, one per error code of dlockd's HTTP API (contract C3).

"Held" is a decision, not a failure: ``Session.acquire`` returns ``None`` for it, and only the
``with``-forms (``Client.lock``, ``Session.lock``), which have no value to return, raise
``Held``. A server or backend that cannot answer is always an error (``Unavailable`` and its
subclasses), never ``Held``.
"""

from __future__ import annotations

import json


class DlockError(Exception):
    """Base of every error this package raises. ``code`` is the C3 wire code when known."""

    code = "internal"
    #: Whether retrying the same call later may succeed (an outage, a limit).
    retryable = False

    def __init__(self, message: str, *, field: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


class InvalidArgument(DlockError):
    """400 ``invalid_argument`` or 413 ``payload_too_large``; ``field`` names the bad input."""

    code = "invalid_argument"


class TlsError(InvalidArgument):
    """The TLS handshake failed (certificate not verified, wrong name, refused client cert)."""

    code = "tls"


class Unauthenticated(DlockError):
    """401 ``unauthenticated`` / ``unauthorized``: the bearer token is missing or unknown."""

    code = "unauthenticated"


class PermissionDenied(DlockError):
    """403 ``permission_denied`` / ``forbidden``: the principal lacks the role."""

    code = "permission_denied"


class SessionNotFound(DlockError):
    """404 ``session_not_found``: the session expired or was closed; it is never revived."""

    code = "session_not_found"


class LockLost(DlockError):
    """409 ``lock_lost`` (or 404 ``lock_not_found`` on extend/release), or a lock whose client
    deadline passed: stop acting on it."""

    code = "lock_lost"


class Held(DlockError):
    """Not granted within the wait (409 ``held``). Only the ``with``-forms raise it; the message
    names the key and never a holder (the client does not know one). ``delayed_until`` is set
    (the backend's time, RFC 3339) when the server said a lock-delay keeps the name ungranted."""

    code = "held"

    def __init__(self, key: str, wait_s: float = 0.0, delayed_until: str | None = None):
        waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
        if delayed_until:
            message = f"{key} is kept ungranted by a lock-delay until {delayed_until}{waited}"
        else:
            message = f"{key} is held by another session{waited}"
        super().__init__(message, status=409)
        self.key = key
        self.delayed_until = delayed_until


class Conflict(DlockError):
    """409 ``conflict``: a semaphore's ``limit`` differs from the one its holders agreed on."""

    code = "conflict"


class ResourceExhausted(DlockError):
    """429 ``too_many_requests`` after retries: a server limit or its bad-token throttle."""

    code = "too_many_requests"
    retryable = True


class Unavailable(DlockError):
    """503/502/504 or no server reachable, after retries on every server. Never "held"."""

    code = "unavailable"
    retryable = True


class NotLeader(Unavailable):
    """503 ``not_leader``: the backend has no leader (etcd), after retries."""

    code = "not_leader"


class UnknownOutcome(Unavailable):
    """The connection was lost after the request was sent: it may or may not have been applied."""

    code = "unknown_outcome"


class Cancelled(DlockError):
    """The caller cancelled the call (``cancel`` event set) before it finished."""

    code = "cancelled"


class Internal(DlockError):
    """500, or an answer this client cannot read."""

    code = "internal"


# The C3 error codes and the class each maps to. "held" is answered as a decision where it is
# one (acquire, campaign); elsewhere it is this error.
_BY_CODE: dict[str, type[DlockError]] = {
    "invalid_argument": InvalidArgument,
    "payload_too_large": InvalidArgument,
    "not_found": InvalidArgument,
    "method_not_allowed": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "unauthorized": Unauthenticated,
    "permission_denied": PermissionDenied,
    "forbidden": PermissionDenied,
    "session_not_found": SessionNotFound,
    "lock_lost": LockLost,
    "lock_not_found": LockLost,
    "conflict": Conflict,
    "too_many_requests": ResourceExhausted,
    "unavailable": Unavailable,
    "not_leader": NotLeader,
    "internal": Internal,
}

_BY_STATUS: dict[int, type[DlockError]] = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: PermissionDenied,
    413: InvalidArgument,
    429: ResourceExhausted,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_object(body: bytes) -> dict:
    """The ``error`` object of a C3 error body; empty when it is not one."""
    try:
        inner = json.loads(body.decode("utf-8", "replace")).get("error")
    except (ValueError, AttributeError):
        inner = None
    return inner if isinstance(inner, dict) else {}


def parse_error_body(body: bytes) -> tuple[str, str, str | None]:
    """(code, message, field) of a C3 error body; empty strings when it is not one."""
    inner = error_object(body)
    code, message, field = inner.get("code"), inner.get("message"), inner.get("field")
    return (
        code if isinstance(code, str) else "",
        message if isinstance(message, str) else "",
        field if isinstance(field, str) else None,
    )


def error_from_response(status: int, body: bytes, what: str, key: str = "") -> DlockError:
    """The typed error for an answer that is not the route's success."""
    code, message, field = parse_error_body(body)
    if not message:
        # A hint of what answered (a proxy, a wrong port) without flooding the message.
        text = body[:200].decode("utf-8", "replace")
        message = f"HTTP {status}" + (f": {text}" if text else "")
    if code == "held":
        return Held(key or what, delayed_until=error_object(body).get("delayed_until"))
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = InvalidArgument if 400 <= status < 500 else Internal
    if cls is Unauthenticated:
        message += " (a bearer token is missing or unknown: see DLOCK_TOKEN)"
    if cls in (InvalidArgument, Conflict) and field is None:
        field = "body" if status == 413 else "request"
    return cls(f"{what}: {message}", field=field, status=status)
