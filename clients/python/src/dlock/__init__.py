"""dlock: the Python client of dlockd, a distributed lock service with fencing tokens.

    import dlock

    client = dlock.Client(["http://127.0.0.1:7070"])      # or DLOCK_SERVER
    with client.lock("payouts/batch-17", ttl="10s") as lock:
        ledger.write(batch, fencing_token=lock.token)      # the resource refuses smaller tokens
        lock.check()                                       # raises LockLost once not trusted

Standard library only. See clients/python/README.md and docs/clients.md.
"""

from . import aio
from ._lease import DEFAULT_CLOCK_DRIFT, duration_ms, lease_deadline, trusted_ttl_ms
from .client import Client
from .info import KeyDelay, LeaderInfo, LockInfo, SemaphoreInfo
from .session import Leadership, Lock, Session, default_owner
from .errors import (Cancelled, Conflict, DlockError, Held, Internal, InvalidArgument, LockLost,
                     NotLeader, PermissionDenied, ResourceExhausted, SessionNotFound, TlsError,
                     Unauthenticated, Unavailable, UnknownOutcome)

__version__ = "0.1.0"

__all__ = [
    "Cancelled", "Client", "aio", "Conflict", "DEFAULT_CLOCK_DRIFT", "DlockError", "Held",
    "Internal", "InvalidArgument", "KeyDelay", "LeaderInfo", "Leadership", "Lock", "LockInfo",
    "LockLost", "NotLeader",
    "PermissionDenied", "ResourceExhausted", "SemaphoreInfo", "Session", "SessionNotFound",
    "TlsError", "Unauthenticated", "Unavailable", "UnknownOutcome", "default_owner",
    "duration_ms", "lease_deadline", "trusted_ttl_ms",
]
