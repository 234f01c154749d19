"""The fencing guard for PostgreSQL resources, through your own driver connection
(docs/fencing.md).

The guard's rule lives in the database: src/fencing/fencing_guard.sql defines
``dlock_fence_admit``, ``dlock_fence_admit_read`` and ``dlock_fence_bind`` next to the table
``fencing_resource``. These helpers call them through the connection (or cursor) you pass:
psycopg 3 is what the project tests with, and this module imports no driver itself, so the
``dlock`` package keeps to the standard library at run time.

    from dlock import fence

    fence.bind(conn, "batch-17", "payouts/batch-17")       # once, at set-up
    with conn.transaction():                                # BEGIN
        if not fence.admit(conn, "batch-17", lock.token, lock.key):
            raise psycopg.Rollback()                        # stale: a greater token wrote
        conn.execute("INSERT INTO ledger ...")              # the fenced write
                                                            # COMMIT on leaving the block

``admit`` must run inside the transaction that writes, and the write must commit with it: the
resource row stays locked until that transaction ends, so two writers of one resource are
serialized and the one with the smaller token is refused.
"""

from __future__ import annotations

from . import errors

#: Tokens are unsigned 64-bit; the guard stores them as PostgreSQL ``bigint``.
MAX_TOKEN = 2**63 - 1

#: The SQLSTATEs the guard's functions raise.
SQLSTATE_LOCK_KEY_MISMATCH = "DL001"
SQLSTATE_BAD_ARGUMENT = "DL002"


class FencingError(errors.InvalidArgument):
    """The guard was misused: no open transaction, or an argument it refuses (an empty
    resource or key, a token <= 0 or above ``MAX_TOKEN``; SQLSTATE DL002). Roll back."""


class LockKeyMismatch(FencingError):
    """The resource is bound to another lock key than the one whose token was presented
    (SQLSTATE DL001): a configuration or programming error, never a decision. PostgreSQL has
    aborted the transaction: roll it back."""


def admit(conn, resource: str, token: int, lock_key: str) -> bool:
    """Checks and raises the highest accepted token of ``resource`` inside the caller's open
    transaction. True: admitted, go on and write in the same transaction, then commit. False:
    stale (a greater token was accepted, or a reader with a greater token read): roll back and
    stop, the grant is over. ``lock_key`` is the key the token belongs to (``lock.key``); an
    unbound resource is bound to it."""
    return _decide(conn, "dlock_fence_admit", resource, token, lock_key)


def admit_read(conn, resource: str, token: int, lock_key: str) -> bool:
    """The read side of a read-write lock: a shared holder presents its token before it reads
    ``resource``, in the transaction that reads. True: admitted (the resource now refuses every
    writer whose token is not above it). False: a writer with a greater token has written."""
    return _decide(conn, "dlock_fence_admit_read", resource, token, lock_key)


def bind(conn, resource: str, lock_key: str) -> None:
    """Binds ``resource`` to ``lock_key``, the one key whose holders may write it. Idempotent;
    ``LockKeyMismatch`` when it is bound to another key (a binding never changes). Runs in the
    caller's transaction when one is open, else on its own."""
    _call(conn, "SELECT dlock_fence_bind(%s::text, %s::text)", (resource, lock_key))


def highest_accepted(conn, resource: str) -> int:
    """The highest token ``resource`` has accepted, 0 when none."""
    row = _call(conn, "SELECT highest_token FROM fencing_resource WHERE resource = %s",
                (resource,))
    return 0 if row is None else int(row[0])


def _decide(conn, function: str, resource: str, token: int, lock_key: str) -> bool:
    if isinstance(token, bool) or not isinstance(token, int) or not 0 < token <= MAX_TOKEN:
        raise FencingError(f"{function}: token {token!r} is not in 1..{MAX_TOKEN}",
                           field="token")
    _require_transaction(conn, function)
    row = _call(conn, f"SELECT {function}(%s::text, %s::bigint, %s::text)",
                (resource, token, lock_key))
    if row is None or row[0] is None:
        raise FencingError(f"{function}: no answer for {resource!r}")
    return row[0] is True


def _connection_of(conn):
    return getattr(conn, "connection", conn)  # a cursor names its connection


def _require_transaction(conn, function: str) -> None:
    """Refuses a check that would commit on its own: checking in one transaction and writing
    in another reopens the window fencing closes. A connection not in autocommit mode opens a
    transaction with the check itself, which lasts until the caller commits."""
    connection = _connection_of(conn)
    if not getattr(connection, "autocommit", False):
        return
    status = getattr(getattr(connection, "info", None), "transaction_status", None)
    if status is not None and int(status) == 0:  # IDLE: no transaction block open
        raise FencingError(f"{function} outside a transaction: open one first "
                           "(`with conn.transaction():`) and write in it")


def _call(conn, sql: str, params: tuple):
    try:
        cursor = conn.execute(sql, params)
        return (cursor if cursor is not None else conn).fetchone()
    except Exception as error:
        state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        message = getattr(getattr(error, "diag", None), "message_primary", None) or str(error)
        if state == SQLSTATE_LOCK_KEY_MISMATCH:
            raise LockKeyMismatch(message, field="lock_key") from error
        if state == SQLSTATE_BAD_ARGUMENT:
            raise FencingError(message) from error
        raise
