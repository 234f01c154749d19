"""Session, Lock and Leadership: the grants a client holds, their keep-alive and extend
threads, their client deadlines and lost signals."""

from __future__ import annotations

import getpass
import logging
import math
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable

from . import errors
from ._core import Call
from ._lease import duration_ms, lease_deadline, trusted_ttl_ms

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("dlock")

LostCallback = Callable[[str], None]
MODES = ("exclusive", "shared", "permit")


def default_owner() -> str:
    """DLOCK_OWNER, else ``<user>@<hostname>``: the owner shown by reads for this process."""
    if owner := os.environ.get("DLOCK_OWNER"):
        return owner
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "dlock"
    host = socket.gethostname()
    return f"{user}@{host}" if host else user


class _LossFlag:
    """The first loss wins: records its reason, sets the event, calls the callback once."""

    def __init__(self, callback: LostCallback | None):
        self.event = threading.Event()
        self.reason = ""
        self._callback = callback
        self._mutex = threading.Lock()

    def mark(self, reason: str) -> bool:
        with self._mutex:
            if self.event.is_set():
                return False
            self.reason = reason
            self.event.set()
        if self._callback is not None:
            try:
                self._callback(reason)
            except Exception:
                log.exception("dlock: on_lost callback failed")
        return True


class Session:
    """A dlockd session kept alive by a background thread every TTL/3.

    ``lost`` (a ``threading.Event``) is set, and ``on_lost(reason)`` called once, when the
    server no longer has the session or its deadline passed without a successful keepalive;
    every lock of the session is lost with it.
    """

    def __init__(self, client: Client, owner: str | None = None, ttl: object = None,
                 lock_delay: object = 0, on_lost: LostCallback | None = None):
        self._core = client._core
        self.client = client
        ttl_ms = duration_ms(ttl, "ttl")
        lock_delay_ms = duration_ms(lock_delay, "lock_delay")
        answer, sent_at = self._core.open_session(owner or default_owner(), ttl_ms, lock_delay_ms,
                                                  self._core.call_for())
        self.id: str = answer["session_id"]
        self.owner: str = answer.get("owner") or owner or default_owner()
        self.ttl_ms = trusted_ttl_ms(ttl_ms, int(answer.get("ttl_ms") or 0))
        if self.ttl_ms <= 0:
            raise errors.Internal("open session: the server granted no ttl_ms")
        #: The lock-delay the server granted, in milliseconds (0 from a dlockd without it).
        self.lock_delay_ms = int(answer.get("lock_delay_ms") or 0)
        self._loss = _LossFlag(on_lost)
        self.lost = self._loss.event
        self._mutex = threading.Lock()
        self._deadline = lease_deadline(sent_at, self.ttl_ms, self._core.clock_drift)
        self._locks: list[Lock] = []
        self._closed = False
        self._gone = False  # the server said it does not exist: nothing to close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keepalive_loop, args=(sent_at,),
                                        name=f"dlock-keepalive-{self.id[:8]}", daemon=True)
        self._thread.start()

    @property
    def lost_reason(self) -> str:
        return self._loss.reason

    @property
    def deadline(self) -> float:
        """Monotonic time until which the session is trusted (-inf once lost)."""
        if self.lost.is_set():
            return -math.inf
        with self._mutex:
            return self._deadline

    @property
    def valid(self) -> bool:
        return not self._closed and time.monotonic() < self.deadline

    def _mark_lost(self, reason: str) -> None:
        if self._loss.mark(reason):
            for lock in list(self._locks):
                lock._mark_lost(f"session lost: {reason}")  # a lock dies with its session

    def _keepalive_loop(self, sent_at: float) -> None:
        # `_stop` also cancels a keepalive in flight: close() need not wait out a slow server.
        core = self._core
        next_at = sent_at + self.ttl_ms / 3000
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            with self._mutex:
                deadline = self._deadline
            try:
                answer, sent = core.keepalive(
                    self.id, Call(deadline, stop=self._stop, cancel=self._stop))
                # A keepalive renews for the session's TTL: never trust more than it opened with.
                ttl_ms = trusted_ttl_ms(self.ttl_ms, int(answer.get("ttl_ms") or 0))
                with self._mutex:
                    self._deadline = lease_deadline(sent, ttl_ms, core.clock_drift)
                next_at = sent + ttl_ms / 3000
            except errors.SessionNotFound as error:
                self._gone = True
                self._mark_lost(f"session expired on the server: {error}")
                return
            except errors.DlockError as error:
                if self._stop.is_set():
                    return
                if time.monotonic() >= deadline:
                    self._mark_lost(f"no successful keepalive within the session TTL: {error}")
                    return
                log.warning("dlock: keepalive of session %s failed, retrying: %s", self.id, error)
                next_at = min(deadline, time.monotonic() + core.backoff_initial)

    def close(self) -> None:
        """Stops the keep-alive and closes the session on the server (releasing its locks)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if self._gone:
            return
        try:
            # Short: closing is a courtesy (the session expires by itself).
            self._core.close_session(self.id, self._core.call_for(self._core.request_timeout))
        except errors.SessionNotFound:
            pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def acquire(self, key: str, **options) -> "Lock | None":
        """Acquires ``key``; returns the Lock, or None when it is still held after ``wait``.

        Options: ``ttl``, ``wait``, ``ns``, ``auto_extend`` (default True), ``mode``,
        ``permits``, ``session_bound``, ``cancel``, ``on_lost`` (see ``acquire_or_raise``).
        """
        try:
            return self.acquire_or_raise(key, **options)
        except errors.Held:
            return None

    def acquire_or_raise(self, key: str, *, ttl: object = None, wait: object = 0,
                         ns: str | None = None, auto_extend: bool = True,
                         mode: str = "exclusive", permits: int = 0, session_bound: bool = False,
                         cancel: threading.Event | None = None,
                         on_lost: LostCallback | None = None) -> "Lock":
        """Acquires ``key``; raises ``Held`` when it is still held after ``wait`` (its
        ``delayed_until`` set when a lock-delay is why).

        ``ttl`` the lock's lease (None: the server's default, 30 s); ``session_bound`` a lock
        that lives as long as the session (no ttl); ``mode`` "exclusive" or "shared" (a read
        lock); ``permits`` N > 0: one of N permits of the semaphore ``key``; ``auto_extend``
        extends every TTL/3 from a background thread; ``cancel``, when set from another thread,
        ends a waiting acquire with ``Cancelled`` (the server drops the waiter at once).
        """
        if mode not in MODES:
            raise errors.InvalidArgument(f"acquire {key}: mode {mode!r}", field="mode")
        if permits:
            if mode == "shared":
                raise errors.InvalidArgument(
                    f"acquire {key}: a shared hold and a semaphore permit exclude each other",
                    field="mode")
            mode = "permit"
        elif mode == "permit":
            raise errors.InvalidArgument(f"acquire {key}: a permit needs permits=N", field="limit")
        ttl_ms = duration_ms(ttl, "ttl")
        if session_bound and ttl_ms:
            raise errors.InvalidArgument("a session-bound lock has no TTL of its own",
                                         field="ttl_ms")
        wait_ms = duration_ms(wait, "wait")
        call = self._core.call_for(self._core.retry_budget + wait_ms / 1000, cancel=cancel)
        answer, sent_at = self._core.acquire(
            key, self.id, ttl_ms=ttl_ms, session_bound=session_bound, wait_ms=wait_ms, ns=ns,
            mode=mode, limit=permits, leader_value=None, call=call)
        return Lock(self, key, ns, answer, sent_at, mode, auto_extend, on_lost)

    def lock(self, key: str, **acquire_options) -> "_Holding":
        """``with session.lock(key, ...) as lock:`` — raises ``Held`` when not granted."""
        return _Holding(lambda: self, False, key, acquire_options)

    def campaign(self, name: str, value: str, *, wait: object = 0, ns: str | None = None,
                 cancel: threading.Event | None = None,
                 on_lost: LostCallback | None = None) -> "Leadership | None":
        """Campaigns to lead the election ``name`` with ``value``; None when another session
        still leads after ``wait``. A leadership lives exactly as long as the session."""
        wait_ms = duration_ms(wait, "wait")
        call = self._core.call_for(self._core.retry_budget + wait_ms / 1000, cancel=cancel)
        try:
            answer, sent_at = self._core.acquire(
                name, self.id, ttl_ms=0, session_bound=True, wait_ms=wait_ms, ns=ns,
                mode="exclusive", limit=0, leader_value=value, call=call)
        except errors.Held:
            return None
        answer["lease"] = "session"  # a leader lives exactly as long as its session (C3)
        leadership = Leadership(self, name, ns, answer, sent_at, "exclusive", False, on_lost)
        leadership.value = (answer.get("leader") or {}).get("value", value)
        return leadership


class Lock:
    """A grant held through a Session: ``token`` is its fencing token, fixed for its life.

    Trusted until ``deadline``: the send time of the acquire (or last extend) + min(TTL asked,
    TTL answered) less the clock-rate allowance, and never past its session's deadline.
    ``lost`` (a ``threading.Event``) is set and ``on_lost`` called once when the lock is known
    lost; ``check()`` raises ``LockLost`` once it is no longer trusted. As a context manager it
    releases on exit.
    """

    def __init__(self, session: Session, key: str, ns: str | None, answer: dict, sent_at: float,
                 mode: str, auto_extend: bool, on_lost: LostCallback | None):
        self.session = session
        self._core = session._core
        self.key = key
        self.ns = ns
        self.token: int = int(answer["fencing_token"])
        self.mode: str = answer.get("mode", mode)
        self.limit: int | None = answer.get("limit")
        self.session_bound: bool = answer.get("lease") == "session"
        self.ttl_ms: int = answer["trusted_ttl_ms"]
        self._loss = _LossFlag(on_lost)
        self.lost = self._loss.event
        self._mutex = threading.Lock()
        # A session-bound lock is trusted exactly as long as its session.
        self._deadline = (math.inf if self.session_bound
                          else lease_deadline(sent_at, self.ttl_ms, self._core.clock_drift))
        self._released = False
        self._gone = False
        self._stop = threading.Event()
        self._thread = None
        session._locks.append(self)
        if session.lost.is_set():  # lost while the acquire was in flight
            self._mark_lost(f"session lost: {session.lost_reason}")
        if auto_extend and not self.session_bound:
            self._thread = threading.Thread(target=self._extend_loop, args=(sent_at,),
                                            name=f"dlock-extend-{key}", daemon=True)
            self._thread.start()

    @property
    def lost_reason(self) -> str:
        return self._loss.reason

    @property
    def deadline(self) -> float:
        """Monotonic time until which this lock is trusted: its own, capped by its session's."""
        with self._mutex:
            own = self._deadline
        return min(own, self.session.deadline)

    @property
    def valid(self) -> bool:
        return (not self._released and not self.lost.is_set()
                and time.monotonic() < self.deadline)

    def check(self) -> None:
        """Raises ``LockLost`` unless the lock is still trusted: call it before each write."""
        if self.valid:
            return
        if time.monotonic() >= self.deadline and not self.lost.is_set() and not self._released:
            self._mark_lost("the lock's client deadline passed without a successful extend")
        raise errors.LockLost(f"{self.key} (token {self.token}): "
                              f"{self.lost_reason or 'released'}")

    def _mark_lost(self, reason: str) -> None:
        self._loss.mark(reason)

    def _record(self, answer: dict, sent_at: float) -> None:
        if self.session_bound:
            return  # its deadline is the session's, which keepalives move
        with self._mutex:
            self.ttl_ms = answer["trusted_ttl_ms"]
            self._deadline = lease_deadline(sent_at, self.ttl_ms, self._core.clock_drift)

    def _extend_loop(self, sent_at: float) -> None:
        next_at = sent_at + self.ttl_ms / 3000
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            if self.lost.is_set():
                return  # lost with its session: nothing left to extend
            with self._mutex:
                deadline = self._deadline
                ttl_ms = self.ttl_ms
            try:
                # `_stop` also cancels an extend in flight: release() need not wait for it.
                answer, sent = self._core.extend(
                    self.key, self.session.id, self.token, ttl_ms, self.ns, self.mode,
                    Call(deadline, stop=self._stop, cancel=self._stop))
                self._record(answer, sent)
                next_at = sent + answer["trusted_ttl_ms"] / 3000
            except errors.LockLost as error:
                self._gone = True
                self._mark_lost(f"lock lost: {error}")
                return
            except errors.SessionNotFound as error:
                self._gone = True
                self.session._gone = True
                self.session._mark_lost(f"session expired on the server: {error}")
                return
            except errors.DlockError as error:
                if self._stop.is_set():
                    return
                if time.monotonic() >= deadline:
                    self._mark_lost(f"no successful extend before the lock's deadline: {error}")
                    return
                log.warning("dlock: extending %s failed, retrying: %s", self.key, error)
                next_at = min(deadline, time.monotonic() + self._core.backoff_initial)

    def extend(self, ttl: object = None) -> None:
        """Extends the lock now (the same token); ``ttl`` None: the current TTL."""
        ttl_ms = duration_ms(ttl, "ttl") or self.ttl_ms
        try:
            answer, sent = self._core.extend(self.key, self.session.id, self.token, ttl_ms,
                                             self.ns, self.mode, self._core.call_for())
        except errors.LockLost as error:
            self._gone = True
            self._mark_lost(f"lock lost: {error}")
            raise
        self._record(answer, sent)

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def release(self) -> None:
        """Releases the grant. Raises ``LockLost`` when it was already lost."""
        if self._released:
            return
        self._released = True
        self._stop_thread()
        if self in self.session._locks:
            self.session._locks.remove(self)
        if self._gone or self.session._gone:
            raise errors.LockLost(f"release {self.key}: {self.lost_reason or 'gone'}")
        if self.session._closed:
            return  # closing the session released it
        call = self._core.call_for(self._core.request_timeout)
        self._core.release(self.key, self.session.id, self.token, self.ns, self.mode, call)

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        lost = self.lost.is_set()
        try:
            self.release()
        except errors.DlockError as error:
            if exc_type is None:
                raise
            log.warning("dlock: releasing %s failed: %s", self.key, error)
        if lost and exc_type is None:
            raise errors.LockLost(f"{self.key} (token {self.token}) was lost while held: "
                                  f"{self.lost_reason}")


class Leadership(Lock):
    """The leadership of an election: a session-bound exclusive grant that carries ``value``.
    Resigns on ``resign()`` or on leaving a ``with`` block."""

    value: str = ""

    @property
    def name(self) -> str:
        return self.key

    def proclaim(self, value: str) -> None:
        """A new value without a new election: the token stays. ``LockLost`` when this
        session no longer leads with this token."""
        if self._released:
            raise errors.LockLost(f"proclaim {self.key}: resigned")
        try:
            self._core.proclaim(self.key, self.session.id, self.token, value, self.ns,
                                self._core.call_for())
        except (errors.LockLost, errors.SessionNotFound) as error:
            self._gone = True
            self._mark_lost(f"leadership lost: {error}")
            raise errors.LockLost(str(error)) from None
        self.value = value

    def resign(self) -> None:
        self.release()

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self in self.session._locks:
            self.session._locks.remove(self)
        if self._gone or self.session._gone:
            raise errors.LockLost(f"resign {self.key}: {self.lost_reason or 'gone'}")
        if self.session._closed:
            return
        self._core.resign(self.key, self.session.id, self.token, self.ns,
                          self._core.call_for(self._core.request_timeout))


class _Holding:
    """The ``with`` form of an acquire: the Lock on entry (``Held`` when not granted), released
    on exit; with a session of its own when made by ``Client.lock``."""

    def __init__(self, open_session: Callable[[], Session], owns_session: bool, key: str,
                 options: dict):
        self._open_session = open_session
        self._owns = owns_session
        self._key = key
        self._options = options
        self._session: Session | None = None
        self._lock: Lock | None = None

    def __enter__(self) -> Lock:
        self._session = self._open_session()
        try:
            lock = self._session.acquire_or_raise(self._key, **self._options)
        except BaseException:
            if self._owns:
                self._session.close()
            raise
        self._lock = lock
        return lock

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._lock.__exit__(exc_type, exc, tb)
        finally:
            if self._owns:
                self._session.close()
