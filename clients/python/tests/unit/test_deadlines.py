"""The client deadline (docs/adr/0012): send time + min(asked, answered) less the clock-rate
allowance, and a lock trusted no longer than its session. Without a dlockd."""

from __future__ import annotations

import time

import pytest

import dlock
from dlock._lease import lease_deadline, resolve_clock_drift, trusted_ttl_ms
from fake_server import FakeServer


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def test_lease_deadline_takes_off_the_ceiling_of_the_drift_allowance():
    assert lease_deadline(100.0, 30_000, 0.01) == pytest.approx(129.7)
    assert lease_deadline(0.0, 1_000, 0.01) == pytest.approx(0.99)
    # ceil: 1001 ms x 1 % = 10.01 ms is an allowance of 11 ms.
    assert lease_deadline(0.0, 1_001, 0.01) == pytest.approx(0.990)
    assert lease_deadline(5.0, 4_000, 0.25) == pytest.approx(8.0)
    assert lease_deadline(5.0, 4_000, 0.0) == pytest.approx(9.0)


def test_the_smaller_promise_is_trusted():
    assert trusted_ttl_ms(2_000, 60_000) == 2_000
    assert trusted_ttl_ms(60_000, 2_000) == 2_000
    assert trusted_ttl_ms(0, 30_000) == 30_000  # the server's default was asked for
    assert trusted_ttl_ms(5_000, 0) == 5_000


def test_clock_drift_option_environment_and_default(monkeypatch):
    assert resolve_clock_drift(None) == dlock.DEFAULT_CLOCK_DRIFT == 0.01
    monkeypatch.setenv("DLOCK_CLOCK_DRIFT", "2%")
    assert resolve_clock_drift(None) == pytest.approx(0.02)
    assert resolve_clock_drift(0.05) == 0.05  # the option wins
    monkeypatch.setenv("DLOCK_CLOCK_DRIFT", "0.5")
    with pytest.raises(dlock.InvalidArgument) as error:
        resolve_clock_drift(None)
    assert error.value.field == "DLOCK_CLOCK_DRIFT"
    with pytest.raises(dlock.InvalidArgument):
        resolve_clock_drift(-0.1)


def test_an_answer_longer_than_asked_never_lengthens_the_lock(server):
    server.session_routes(ttl_ms=60_000)
    server.grant("/v1/locks/k", ttl_ms=60_000)
    client = dlock.Client(server.url, clock_drift=0.01)
    with client.session(ttl="60s") as session:
        before = time.monotonic()
        lock = session.acquire("k", ttl="2s", auto_extend=False)
        after = time.monotonic()
        assert lock.ttl_ms == 2_000
        assert before + 1.98 <= lock.deadline <= after + 1.98
        lock.release()


def test_the_server_default_ttl_is_trusted_less_the_allowance(server):
    server.session_routes(ttl_ms=60_000)
    server.grant("/v1/locks/k", ttl_ms=30_000)
    client = dlock.Client(server.url, clock_drift=0.1)
    with client.session(ttl="60s") as session:
        before = time.monotonic()
        lock = session.acquire("k", auto_extend=False)  # ttl None: the server's default
        after = time.monotonic()
        assert before + 27.0 <= lock.deadline <= after + 27.0
        lock.release()


def test_a_session_is_trusted_for_its_ttl_less_the_allowance(server):
    server.session_routes(ttl_ms=90_000)
    client = dlock.Client(server.url, clock_drift=0.01)
    before = time.monotonic()
    with client.session(ttl="20s") as session:  # the server answers more than asked
        after = time.monotonic()
        assert session.ttl_ms == 20_000
        assert before + 19.8 <= session.deadline <= after + 19.8


def test_a_lock_is_trusted_no_longer_than_its_session(server):
    server.session_routes(ttl_ms=3_000)
    server.grant("/v1/locks/k", ttl_ms=60_000)
    client = dlock.Client(server.url, clock_drift=0.0)
    with client.session(ttl="3s") as session:
        lock = session.acquire("k", ttl="60s", auto_extend=False)
        assert lock.deadline == session.deadline
        assert lock.deadline <= time.monotonic() + 3.0
        lock.release()


def test_a_lost_session_loses_its_locks_at_once(server):
    server.session_routes(ttl_ms=1_500, keepalive_status=404)
    server.grant("/v1/locks/k", ttl_ms=60_000)
    client = dlock.Client(server.url)
    reasons = []
    session = client.session(ttl="1500ms")
    lock = session.acquire("k", ttl="60s", auto_extend=False, on_lost=reasons.append)
    assert session.lost.wait(3), "the keepalive's 404 did not mark the session lost"
    assert lock.lost.is_set() and not lock.valid
    assert reasons and "session" in reasons[0]
    with pytest.raises(dlock.LockLost):
        lock.check()
    session.close()
