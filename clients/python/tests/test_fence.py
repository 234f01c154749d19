"""dlock.fence, the guard helper, against a real PostgreSQL with the guard's SQL functions
installed from src/fencing/fencing_guard.sql (docs/fencing.md). psycopg 3 is a test dependency
(tests/requirements.txt), never one of the package."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time

import psycopg  # tests/requirements.txt: a missing driver fails the run, never skips it
import pytest

from dlock import fence
from fence_postgres import PostgresServer

ROOT = pathlib.Path(__file__).resolve().parents[3]
GUARD_SQL = ROOT / "src" / "fencing" / "fencing_guard.sql"
KEY = "payouts/batch-17"


@pytest.fixture(scope="module")
def server():
    pg = PostgresServer()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(GUARD_SQL.read_text(encoding="utf-8"))  # the file's text, as psql -f runs it
        conn.execute("CREATE TABLE ledger (payout text, token bigint)")
    yield pg
    pg.close()


@pytest.fixture
def connect(server):
    opened = []

    def open_connection(autocommit=True):
        conn = psycopg.connect(server.url, autocommit=autocommit)
        opened.append(conn)
        return conn

    yield open_connection
    for conn in opened:
        conn.close()


_names = iter(range(1_000_000))


@pytest.fixture
def resource():
    return f"batch-{next(_names)}"


def pay(conn, resource, token, key=KEY, payout="p1"):
    """The documented pattern: admit and write in one transaction; True when it was written."""
    with conn.transaction():
        if not fence.admit(conn, resource, token, key):
            raise psycopg.Rollback()
        conn.execute("INSERT INTO ledger VALUES (%s, %s)", (f"{resource}/{payout}", token))
        return True
    return False


def ledger_tokens(conn, resource):
    rows = conn.execute("SELECT token FROM ledger WHERE payout LIKE %s ORDER BY token",
                        (f"{resource}/%",)).fetchall()
    return [row[0] for row in rows]


def test_importing_dlock_does_not_import_a_driver():
    code = ("import sys, dlock, dlock.fence; "
            "sys.exit(1 if any(m.split('.')[0] in ('psycopg', 'psycopg2') for m in sys.modules) "
            "else 0)")
    assert subprocess.run([sys.executable, "-c", code], env=os.environ).returncode == 0


def test_a_token_is_admitted_repeatedly_and_a_smaller_one_is_stale(connect, resource):
    conn = connect()
    assert pay(conn, resource, 40, payout="p1")
    assert pay(conn, resource, 40, payout="p2")  # one grant, many writes
    assert pay(conn, resource, 41, payout="p3")  # the next grant takes over
    assert not pay(conn, resource, 40, payout="p4")  # the old grant is over: nothing written
    assert ledger_tokens(conn, resource) == [40, 40, 41]
    assert fence.highest_accepted(conn, resource) == 41


def test_a_stale_writer_waits_for_the_new_holder_and_is_refused(connect, resource):
    new_holder, stale = connect(), connect()
    pay(new_holder, resource, 5)
    outcome = []
    with new_holder.transaction():
        assert fence.admit(new_holder, resource, 7, KEY)  # the row is locked until COMMIT
        writer = threading.Thread(target=lambda: outcome.append(pay(stale, resource, 6)))
        writer.start()
        time.sleep(0.3)
        assert not outcome, "the stale writer was not serialized behind the open transaction"
        new_holder.execute("INSERT INTO ledger VALUES (%s, 7)", (f"{resource}/p1",))
    writer.join(timeout=10)
    assert outcome == [False]
    assert ledger_tokens(new_holder, resource) == [5, 7]


def test_admit_refuses_to_run_outside_a_transaction(connect, resource):
    conn = connect(autocommit=True)
    with pytest.raises(fence.FencingError, match="outside a transaction"):
        fence.admit(conn, resource, 3, KEY)
    assert fence.highest_accepted(conn, resource) == 0


def test_a_connection_without_autocommit_checks_in_its_implicit_transaction(connect, resource):
    conn = connect(autocommit=False)
    assert fence.admit(conn, resource, 3, KEY)
    conn.rollback()  # the check goes with the transaction it ran in
    assert fence.highest_accepted(conn, resource) == 0
    assert fence.admit(conn.cursor(), resource, 3, KEY)  # a cursor works the same
    conn.commit()
    assert fence.highest_accepted(conn, resource) == 3


def test_a_token_of_another_lock_key_is_refused_with_lock_key_mismatch(connect, resource):
    conn = connect()
    fence.bind(conn, resource, KEY)
    fence.bind(conn, resource, KEY)  # idempotent
    with pytest.raises(fence.LockKeyMismatch) as raised:
        with conn.transaction():
            fence.admit(conn, resource, 900, "payouts/batch-18")  # a bigger number, other key
    assert raised.value.__cause__.sqlstate == "DL001"
    assert isinstance(raised.value, fence.FencingError)
    with pytest.raises(fence.LockKeyMismatch):
        fence.bind(conn, resource, "payouts/batch-18")  # a binding never changes
    assert fence.highest_accepted(conn, resource) == 0
    assert pay(conn, resource, 40)  # the bound key's holders still write


def test_an_unbound_resource_is_bound_by_its_first_write(connect, resource):
    conn = connect()
    assert pay(conn, resource, 10, key=KEY)
    with pytest.raises(fence.LockKeyMismatch):
        pay(conn, resource, 11, key="payouts/other")


def test_readers_order_writers_after_them(connect, resource):
    conn = connect()
    assert pay(conn, resource, 5)
    with conn.transaction():
        assert fence.admit_read(conn, resource, 10, KEY)  # a reader's token is recorded
    with conn.transaction():
        assert fence.admit_read(conn, resource, 8, KEY)  # readers come in any order
    assert not pay(conn, resource, 9)  # a writer below an admitted reader: its grant was over
    assert pay(conn, resource, 11)
    with conn.transaction():
        assert not fence.admit_read(conn, resource, 10, KEY)  # a greater writer wrote


@pytest.mark.parametrize("resource_name, token, key", [
    ("", 5, KEY),                   # refused by the SQL function (DL002)
    ("batch", 5, ""),               # the same
    ("batch", 0, KEY),              # refused before it is sent
    ("batch", 2**63, KEY),          # does not fit a bigint
    ("batch", True, KEY),           # not a token
])
def test_bad_arguments_are_fencing_errors(connect, resource_name, token, key):
    conn = connect()
    with pytest.raises(fence.FencingError):
        with conn.transaction():
            fence.admit(conn, resource_name, token, key)
    with pytest.raises(fence.FencingError):
        fence.bind(conn, "", KEY)
