"""asyncio forms of the calls that wait: each runs the blocking call in a worker thread, and
cancelling the awaiting task cancels the wait at once (the client closes the waiting request,
so dlockd drops the waiter; a grant that arrived as the task was cancelled is released).

    async with dlock.aio.lock(client, "payouts/batch-17", ttl="10s", wait="5s") as lock:
        await ledger.write(batch, fencing_token=lock.token)

The Lock it gives is the same object as the blocking API's: its ``lost`` event, ``check()`` and
background extend thread work unchanged.
"""

from __future__ import annotations

import asyncio
import functools
import threading

from . import errors
from .client import Client
from .info import LeaderInfo
from .session import Leadership, Lock, Session, _Holding


async def _cancellable(function, /, *args, **kwargs):
    cancel = threading.Event()
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, functools.partial(function, *args, cancel=cancel, **kwargs))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.set()
        try:
            granted = await future
        except errors.DlockError:
            granted = None
        if isinstance(granted, Lock):  # granted just before the cancel reached it
            try:
                await asyncio.to_thread(granted.release)
            except errors.DlockError:
                pass
        raise


async def acquire(session: Session, key: str, **options) -> Lock | None:
    """``Session.acquire`` awaited; cancelling the task cancels a waiting acquire."""
    return await _cancellable(session.acquire, key, **options)


async def campaign(session: Session, name: str, value: str, **options) -> Leadership | None:
    """``Session.campaign`` awaited; cancelling the task cancels the wait."""
    return await _cancellable(session.campaign, name, value, **options)


async def observe(client: Client, name: str, after_token: int | None = 0,
                  after_value: str | None = None, **options) -> LeaderInfo | None:
    """``Client.observe`` awaited; cancelling the task ends the long poll."""
    return await _cancellable(client.observe, name, after_token, after_value, **options)


async def session(client: Client, owner: str | None = None, **options) -> Session:
    return await asyncio.to_thread(client.session, owner, **options)


class lock:
    """``async with dlock.aio.lock(client_or_session, key, **acquire_options) as lock:`` — as
    ``Client.lock`` / ``Session.lock``: raises ``Held`` when not granted, releases on exit."""

    def __init__(self, owner: Client | Session, key: str, *, session_ttl: object = None,
                 **options):
        self._owner = owner
        self._key = key
        self._session_ttl = session_ttl
        self._options = options
        self._holding: _Holding | None = None

    async def __aenter__(self) -> Lock:
        if isinstance(self._owner, Client):
            opened = await asyncio.to_thread(self._owner.session, ttl=self._session_ttl)
            self._holding = _Holding(lambda: opened, True, self._key, self._options)
        else:
            self._holding = _Holding(lambda: self._owner, False, self._key, self._options)
        holding = self._holding
        try:
            granted = await _cancellable(holding._open_session().acquire_or_raise, self._key,
                                         **self._options)
        except BaseException:  # Held among them
            if holding._owns:
                await asyncio.to_thread(holding._open_session().close)
            raise
        holding._session = holding._open_session()
        holding._lock = granted
        return granted

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await asyncio.to_thread(self._holding.__exit__, exc_type, exc, tb)
