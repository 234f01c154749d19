#!/usr/bin/env python3
"""payout-executor in Python: the peer of examples/payout-executor (C++), with the Python client
(clients/python) and its fencing guard helper (dlock.fence) over psycopg 3. See README.md here.

Competes for per-batch locks ("payouts/<batch>") through dlockd and pays each pending payout of
a batch into `ledger` in one transaction with marking it done, behind the fencing guard
(resource = the batch). Every step is one JSON line on stdout, with the event names, fields and
monotonic times of the C++ executor, so tests/safety reads either as a history.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time

import psycopg

import dlock
from dlock import fence

# The DDL of the payouts service itself (the guard's is src/fencing/fencing_guard.sql).
SCHEMA = """
CREATE TABLE IF NOT EXISTS payout (
  id           bigserial PRIMARY KEY,
  batch        text   NOT NULL,
  amount_cents bigint NOT NULL,
  status       text   NOT NULL DEFAULT 'pending'
);
-- No UNIQUE on payout_id, on purpose: fencing, not the schema, must prevent double payment,
-- and every insert records the token it was made under.
CREATE TABLE IF NOT EXISTS ledger (
  seq          bigserial PRIMARY KEY,
  payout_id    bigint NOT NULL REFERENCES payout (id),
  amount_cents bigint NOT NULL,
  token        bigint NOT NULL,
  worker       text   NOT NULL,
  paid_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
GUARD_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src",
                         "fencing", "fencing_guard.sql")


def lock_key(batch: str) -> str:
    """The dlock key that protects a batch; the guard binds the batch to it."""
    return "payouts/" + batch


class Log:
    """One JSON object per line on stdout, each with worker, pid and t (CLOCK_MONOTONIC ns: one
    clock for every process on the machine, so the tests can order events of executors)."""

    def __init__(self, worker: str):
        self.worker = worker
        self._mutex = threading.Lock()

    def emit(self, **event) -> None:
        event["worker"] = self.worker
        event["pid"] = os.getpid()
        event.setdefault("t", time.monotonic_ns())
        line = json.dumps(event) + "\n"
        with self._mutex:
            sys.stdout.write(line)
            sys.stdout.flush()


class ClientLog(logging.Handler):
    """The client's warnings (a failed extend or keepalive being retried) as client_log lines."""

    def __init__(self, log: Log):
        super().__init__(logging.INFO)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        self._log.emit(event="client_log", message=record.getMessage())


def connect(pg_url: str) -> psycopg.Connection:
    # autocommit: every transaction is an explicit `with conn.transaction()` block.
    conn = psycopg.connect(pg_url, autocommit=True)
    # A holder paused inside its transaction keeps the resource's fencing row locked, which
    # would stall every later holder; PostgreSQL ends such a session after a while instead (the
    # paused holder's commit then fails, and nothing of it is applied).
    conn.execute("SET idle_in_transaction_session_timeout = '5s'")
    return conn


def init_database(args) -> int:
    """--init: the guard's schema, the payouts tables, each batch bound to its key and seeded
    once."""
    with open(args.guard_sql, encoding="utf-8") as f:
        guard_sql = f.read()
    with psycopg.connect(args.pg_url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(7207002)")
            conn.execute(guard_sql)
            conn.execute(SCHEMA)
            for batch in args.batches:
                fence.bind(conn, batch, lock_key(batch))  # it compares this key's tokens only
                if conn.execute("SELECT 1 FROM payout WHERE batch = %s LIMIT 1",
                                (batch,)).fetchone():
                    continue
                for i in range(args.seed_payouts):
                    conn.execute("INSERT INTO payout (batch, amount_cents) VALUES (%s, %s)",
                                 (batch, 100 * (i + 1)))
    return 0


class Executor:
    def __init__(self, args):
        self.args = args
        self.log = Log(args.worker_id)
        handler = ClientLog(self.log)
        logging.getLogger("dlock").addHandler(handler)
        logging.getLogger("dlock").setLevel(logging.INFO)
        # DLOCK_TOKEN / DLOCK_TOKEN_FILE, DLOCK_CACERT ...: the client reads the environment.
        self.client = dlock.Client(args.server, request_timeout="5s",
                                   retry_budget="3s")  # keep the loop responsive to outages
        self.conn = connect(args.pg_url)
        self.session: dlock.Session | None = None

    def reconnect(self) -> None:
        try:
            self.conn.close()
            self.conn = connect(self.args.pg_url)
        except psycopg.Error as error:
            self.log.emit(event="db_error", message=str(error))

    def pending(self, batch: str) -> list[tuple[str, int]]:
        rows = self.conn.execute(
            "SELECT id, amount_cents FROM payout WHERE batch = %s AND status = 'pending' "
            "ORDER BY id", (batch,)).fetchall()
        return [(str(id_), amount) for id_, amount in rows]

    def run(self) -> int:
        give_up = time.monotonic() + self.args.give_up_s
        self.log.emit(event="start", fencing=self.args.fencing)
        while time.monotonic() < give_up:
            try:
                todo = [batch for batch in self.args.batches if self.pending(batch)]
            except psycopg.Error as error:
                self.log.emit(event="db_error", message=str(error))
                self.reconnect()
                time.sleep(0.1)
                continue
            if not todo:
                self.log.emit(event="exit", code=0)
                return 0
            for batch in todo:
                self.work_on(batch)
        self.log.emit(event="exit", code=1)
        return 1

    def ensure_session(self) -> bool:
        if self.session is not None and not self.session.lost.is_set():
            return True
        self.session = None
        try:
            self.session = self.client.session(owner=self.args.worker_id,
                                               ttl=self.args.ttl_ms / 1000)
        except dlock.DlockError as error:
            self.log.emit(event="session_error", message=str(error))
            time.sleep(0.1)
            return False
        self.log.emit(event="session", session=self.session.id)
        return True

    def work_on(self, batch: str) -> None:
        """One grant of the batch's key (a TTL lock, or with --elect a leadership) and its
        payments."""
        if not self.ensure_session():
            return
        key = lock_key(batch)
        start = time.monotonic_ns()
        try:
            if self.args.elect:
                lock = self.session.campaign(key, self.args.worker_id,
                                             wait=self.args.wait_ms / 1000)
            else:
                lock = self.session.acquire(key, ttl=self.args.ttl_ms / 1000,
                                            wait=self.args.wait_ms / 1000, auto_extend=True)
        except dlock.UnknownOutcome as error:
            self.op("acquire", key, start, "unknown", 0, str(error))
            return
        except dlock.DlockError as error:
            self.op("acquire", key, start, "fail", 0, str(error))
            return
        if lock is None:
            self.op("acquire", key, start, "fail", 0, "held")
            return
        # The deadline the lock was promised until (the safety checker's I5 reads it).
        self.op("acquire", key, start, "ok", lock.token, "",
                promised_until=int(lock.deadline * 1e9))
        self.pay_batch(batch, key, lock)
        release_start = time.monotonic_ns()
        try:
            lock.release()
            self.op("release", key, release_start, "ok", lock.token, "")
        except dlock.DlockError as error:
            self.op("release", key, release_start, "fail", lock.token, str(error))

    def pay_batch(self, batch: str, key: str, lock: dlock.Lock) -> None:
        try:
            payouts = self.pending(batch)
        except psycopg.Error as error:
            self.log.emit(event="db_error", message=str(error))
            self.reconnect()
            return
        for payout_id, amount in payouts:
            if not lock.valid:
                self.log.emit(event="lock_lost", key=key, reason=lock.lost_reason)
                return
            # The check above and the write below are not atomic: a pause here (GC, swap,
            # SIGSTOP) can outlast the lease. Only the fencing guard makes the write safe.
            self.log.emit(event="pay_begin", batch=batch, payout=payout_id)
            if self.args.hold_extra_ms > 0:
                time.sleep(self.args.hold_extra_ms / 1000)
            if not self.pay(batch, key, lock.token, payout_id, amount):
                return

    def pay(self, batch: str, key: str, token: int, payout_id: str, amount: int) -> bool:
        """One payout in one transaction: the guard (skipped with --no-fencing), the ledger
        insert and the status update commit together. Logged as a write: rejected (stale:
        nothing done), ok (committed), fail (not applied) or unknown (the COMMIT failed: it may
        have been applied). True when ok."""
        event = {"event": "write", "batch": batch, "payout": payout_id, "token": token,
                 "start": time.monotonic_ns()}
        committing = False
        try:
            with self.conn.transaction():
                if self.args.fencing and not fence.admit(self.conn, batch, token, key):
                    event["outcome"] = "rejected"
                    raise psycopg.Rollback()  # ends the block with a ROLLBACK, silently
                self.conn.execute("INSERT INTO ledger (payout_id, amount_cents, token, worker) "
                                  "VALUES (%s, %s, %s, %s)",
                                  (payout_id, amount, token, self.args.worker_id))
                self.conn.execute("UPDATE payout SET status = 'done' WHERE id = %s",
                                  (payout_id,))
                committing = True  # the block's end is the COMMIT
            event.setdefault("outcome", "ok")
        except (psycopg.Error, dlock.DlockError) as error:
            event["outcome"] = "unknown" if committing else "fail"
            event["message"] = str(error)
            if self.conn.closed or self.conn.broken:
                self.reconnect()
        event["end"] = time.monotonic_ns()
        self.log.emit(**event)
        return event["outcome"] == "ok"

    def op(self, kind: str, key: str, start: int, outcome: str, token: int, message: str,
           promised_until: int = 0) -> None:
        event = {"event": kind, "key": key, "start": start, "end": time.monotonic_ns(),
                 "outcome": outcome, "token": token,
                 "session": self.session.id if self.session else ""}
        if message:
            event["message"] = message
        if promised_until > 0:
            event["promised_until"] = promised_until
        self.log.emit(**event)


def parse_args(argv: list[str]):
    parser = argparse.ArgumentParser(
        description="payout-executor: pays batches of payouts exactly once under dlock locks")
    parser.add_argument("--server", default=None, help="dlockd URL (default: DLOCK_SERVER)")
    parser.add_argument("--pg-url", required=True, help="libpq URL of the payouts database")
    parser.add_argument("--batches", default="b0", help="comma-separated batch names")
    parser.add_argument("--worker-id", default=f"worker-{os.getpid()}",
                        help="name in logs, the ledger and the lock owner")
    parser.add_argument("--hold-extra-ms", type=int, default=0,
                        help="pause before each payment (a slow holder)")
    parser.add_argument("--ttl-ms", type=int, default=30000, help="session and lock lease")
    parser.add_argument("--wait-ms", type=int, default=2000,
                        help="how long one acquire waits for a held batch")
    parser.add_argument("--give-up-s", type=int, default=120,
                        help="exit 1 if not all batches are paid by then")
    parser.add_argument("--no-fencing", dest="fencing", action="store_false",
                        help="skip the fencing guard (UNSAFE: the negative control of the "
                             "safety tests)")
    parser.add_argument("--elect", action="store_true",
                        help="lead each batch through an election (session-bound) instead of a "
                             "TTL lock")
    parser.add_argument("--init", action="store_true",
                        help="create the schema and seed the batches, then exit")
    parser.add_argument("--seed-payouts", type=int, default=0, help="with --init: payouts per batch")
    parser.add_argument("--guard-sql", default=GUARD_SQL,
                        help="with --init: the guard's SQL (default: src/fencing/fencing_guard.sql "
                             "of this tree)")
    args = parser.parse_args(argv)
    args.batches = [batch for batch in args.batches.split(",") if batch]
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        return init_database(args) if args.init else Executor(args).run()
    except Exception as error:  # as the C++ executor: one line, exit 1
        print(f"payout-executor: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
