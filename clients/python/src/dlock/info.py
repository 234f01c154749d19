"""What reads answer: lock holders, semaphores, election leaders."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LockInfo:
    """A live holder of a key, as ``GET /v1/locks/{key}`` shows it."""

    key: str
    fencing_token: int
    owner: str
    mode: str
    lease: str
    acquired_at: str
    expires_at: str
    session_id: str | None = None  # shown to its own principal and admins only (C6)
    limit: int | None = None  # a permit's semaphore size
    value: str | None = None  # a leader's value

    @classmethod
    def decode(cls, o: dict) -> "LockInfo":
        return cls(
            key=o.get("key", ""), fencing_token=int(o.get("fencing_token", 0)),
            owner=o.get("owner", ""), mode=o.get("mode", "exclusive"), lease=o.get("lease", "ttl"),
            acquired_at=o.get("acquired_at", ""), expires_at=o.get("expires_at", ""),
            session_id=o.get("session_id"), limit=o.get("limit"), value=o.get("value"),
        )


@dataclass(frozen=True)
class SemaphoreInfo:
    name: str
    limit: int  # 0 while no permit is held
    holders: list[LockInfo]


@dataclass(frozen=True)
class LeaderInfo:
    name: str
    owner: str
    value: str
    fencing_token: int
    acquired_at: str
    expires_at: str
    session_id: str | None = None

    @classmethod
    def decode(cls, o: dict, name: str) -> "LeaderInfo":
        leader = o.get("leader") or {}
        return cls(
            name=o.get("name", name), owner=leader.get("owner", ""),
            value=leader.get("value", ""), fencing_token=int(o.get("fencing_token", 0)),
            acquired_at=o.get("acquired_at", ""), expires_at=o.get("expires_at", ""),
            session_id=o.get("session_id"),
        )


@dataclass(frozen=True)
class KeyDelay:
    """A key a lock-delay keeps ungranted (C3 "Lock-delay") and when the delay ends (the
    backend's clock, RFC 3339)."""

    key: str
    delayed_until: str
