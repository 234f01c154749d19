"""The asyncio forms: a cancelled task cancels the waiting request at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import dlock
from fake_server import FakeServer


@pytest.fixture
def server():
    fake = FakeServer()
    fake.session_routes()
    yield fake
    fake.close()


def test_async_with_lock_gives_the_lock_and_releases_it(server):
    server.grant("/v1/locks/k", ttl_ms=10_000)

    async def main():
        client = dlock.Client(server.url)
        async with dlock.aio.lock(client, "k", ttl="10s") as lock:
            assert lock.token == 7 and lock.valid
        return lock

    lock = asyncio.run(main())
    assert not lock.valid
    assert any(method == "DELETE" and "/v1/locks/k" in path for method, path, _ in server.requests)


def test_async_held_raises_held(server):
    server.routes["POST /v1/locks/k/acquire"] = lambda body: (
        409, {"error": {"code": "held", "message": "held"}})

    async def main():
        async with dlock.aio.lock(dlock.Client(server.url), "k"):
            pass

    with pytest.raises(dlock.Held):
        asyncio.run(main())


def test_cancelling_the_task_cancels_the_waiting_acquire(server):
    answered = threading.Event()

    def wait_then_held(body):
        answered.wait(5)  # the server holds the wait; the test never sets it
        return 409, {"error": {"code": "held", "message": "held"}}

    server.routes["POST /v1/locks/k/acquire"] = wait_then_held

    async def main():
        client = dlock.Client(server.url)
        session = await dlock.aio.session(client)
        task = asyncio.create_task(dlock.aio.acquire(session, "k", wait="30s"))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        elapsed = time.monotonic() - started
        await asyncio.to_thread(session.close)
        return elapsed

    try:
        assert asyncio.run(main()) < 1.0
    finally:
        answered.set()
