"""Client: the entry point, thread-safe, shared by a process (the Python peer of
include/dlock/client.h)."""

from __future__ import annotations

import threading

from ._core import Core, quote, query
from ._lease import duration_ms
from .info import KeyDelay, LeaderInfo, LockInfo, SemaphoreInfo
from .session import LostCallback, Session, _Holding


class Client:
    """Talks to one or several dlockd sharing one backend. Thread-safe; share one per process.

    Every argument has an environment fallback, the same as the ``dlock`` CLI's:
    ``servers`` (a list or a comma-separated string) DLOCK_SERVER; ``token`` DLOCK_TOKEN;
    ``token_file`` DLOCK_TOKEN_FILE; ``admin_token`` DLOCK_ADMIN_TOKEN; ``ca_file``
    DLOCK_CACERT; ``cert_file``/``key_file`` DLOCK_CERT/DLOCK_KEY (mTLS); ``clock_drift``
    DLOCK_CLOCK_DRIFT (default 1 %); ``namespace`` DLOCK_NAMESPACE.
    """

    def __init__(
        self,
        servers: list[str] | str | None = None,
        *,
        token: str | None = None,
        token_file: str | None = None,
        admin_token: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        clock_drift: float | None = None,
        request_timeout: object = "10s",
        retry_budget: object = "15s",
        backoff_initial: object = "50ms",
        backoff_max: object = "2s",
        namespace: str | None = None,
    ):
        self._core = Core(
            servers, token, token_file, admin_token, ca_file, cert_file, key_file, clock_drift,
            duration_ms(request_timeout, "request_timeout") / 1000,
            duration_ms(retry_budget, "retry_budget") / 1000,
            duration_ms(backoff_initial, "backoff_initial") / 1000,
            duration_ms(backoff_max, "backoff_max") / 1000,
            namespace,
        )

    @property
    def servers(self) -> list[str]:
        return list(self._core.servers)

    @property
    def clock_drift(self) -> float:
        return self._core.clock_drift

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def session(self, owner: str | None = None, *, ttl: object = None, lock_delay: object = 0,
                on_lost: LostCallback | None = None) -> "Session":
        """Opens a session (keep-alive thread every TTL/3). Use it as a context manager."""
        return Session(self, owner=owner, ttl=ttl, lock_delay=lock_delay, on_lost=on_lost)

    def lock(self, key: str, *, session_ttl: object = None, owner: str | None = None,
             **acquire_options) -> "_Holding":
        """``with client.lock("payouts/batch-17", ttl="10s") as lock:`` — a lock in a session of
        its own, opened on entry and closed on exit. Raises ``Held`` when not granted within
        ``wait``; takes the options of ``Session.acquire``."""
        return _Holding(lambda: Session(self, owner=owner, ttl=session_ttl), True, key,
                        acquire_options)

    # --- reads and admin ------------------------------------------------------------------

    def get(self, key: str, *, ns: str | None = None) -> LockInfo | None:
        """The holder with the greatest token, or None when the key is free."""
        o = self._core.get(f"/v1/locks/{quote(key)}" + query(ns=self._core.ns(ns)), f"get {key}",
                           self._core.call_for(), "lock_not_found")
        return None if o is None else LockInfo.decode(o)

    def holders(self, key: str, *, ns: str | None = None) -> list[LockInfo]:
        o = self._core.get(f"/v1/locks/{quote(key)}" + query(ns=self._core.ns(ns)), f"get {key}",
                           self._core.call_for(), "lock_not_found")
        if o is None:
            return []
        return [LockInfo.decode(h) for h in o.get("holders", [o])]

    def list(self, prefix: str = "", *, limit: int = 100, ns: str | None = None) -> list[LockInfo]:
        o = self._core.get("/v1/locks" + query(prefix=prefix, limit=limit, ns=self._core.ns(ns)),
                           "list", self._core.call_for(), "")
        return [LockInfo.decode(h) for h in (o or {}).get("locks", [])]

    def semaphore(self, name: str, *, ns: str | None = None) -> SemaphoreInfo:
        o = self._core.get(f"/v1/semaphores/{quote(name)}" + query(ns=self._core.ns(ns)),
                           f"get semaphore {name}", self._core.call_for(), "") or {}
        return SemaphoreInfo(o.get("name", name), int(o.get("limit") or 0),
                             [LockInfo.decode(h) for h in o.get("holders", [])])

    def leader(self, name: str, *, ns: str | None = None) -> LeaderInfo | None:
        """The election's leader, or None when nobody leads."""
        return self.observe(name, after_token=None, wait=0, ns=ns)

    def observe(self, name: str, after_token: int | None = 0, after_value: str | None = None,
                *, wait: object = "30s", ns: str | None = None,
                cancel: threading.Event | None = None) -> LeaderInfo | None:
        """One long poll: answers once a leader with a token greater than ``after_token`` leads
        (or, with ``after_value``, that leader proclaims another value), at the latest after
        ``wait`` with the state then. Pass the last answer's token and value to see each change
        once."""
        wait_ms = duration_ms(wait, "wait")
        params = {"ns": self._core.ns(ns)}
        if after_token is not None:
            params["after_token"] = after_token
            if after_value is not None:
                params["after_value"] = after_value
            if wait_ms > 0:
                params["wait_ms"] = wait_ms
        call = self._core.call_for(self._core.retry_budget + wait_ms / 1000, cancel=cancel,
                                   slack=wait_ms / 1000)
        o = self._core.get(f"/v1/elections/{quote(name)}" + query(**params),
                           f"observe {name}", call, "no_leader")
        return None if o is None else LeaderInfo.decode(o, name)

    def delays(self, prefix: str = "", *, limit: int = 100,
               ns: str | None = None) -> list[KeyDelay]:
        """The keys under ``prefix`` a lock-delay keeps ungranted, and when each delay ends."""
        o = self._core.get("/v1/locks" + query(prefix=prefix, limit=limit, ns=self._core.ns(ns)),
                           "list", self._core.call_for(), "")
        return [KeyDelay(d.get("key", ""), d.get("delayed_until", ""))
                for d in (o or {}).get("delays", [])]

    def clear_delay(self, key: str, *, ns: str | None = None) -> bool:
        """Admin: ends the lock-delays running on ``key`` (it is granted at once, its waiters
        tried); whether one was running. The admin token as for ``revoke``."""
        return self._core.clear_delay(key, ns, self._core.call_for())

    def revoke(self, key: str, *, ns: str | None = None) -> dict:
        """Admin: ends the key's grant (``admin_token`` or DLOCK_ADMIN_TOKEN, else the token)."""
        return self._core.revoke(key, ns, self._core.call_for())
