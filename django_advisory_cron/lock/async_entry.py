"""``async with advisory_lock(...)``: the same lock, its blocking statements (and a ``wait``)
in a worker thread, so the event loop serves other requests meanwhile. Session scope only:
Django runs no transaction across ``await``.

Cancelled while it waits (a request's timeout, a client gone), it stops waiting, and what the
thread took is released before the cancellation goes on: no ``__aexit__`` would ever release
it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from ..exceptions import LockScopeError

Lock = TypeVar("Lock")

#: Releases of cancelled waits still going (the event loop keeps only weak references to its
#: tasks).
_GIVING_UP: set[asyncio.Future[None]] = set()


async def enter(
    acquire: Callable[[], Lock], release: Callable[[], None], abandoned: threading.Event
) -> Lock:
    """``acquire()`` in a worker thread; if the waiting task is cancelled, set ``abandoned``
    (the wait ends at once) and ``release()`` once the thread's last statement has returned."""
    taking = asyncio.ensure_future(asyncio.to_thread(acquire))
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        abandoned.set()
        giving_up = asyncio.ensure_future(_give_up(taking, release))
        _GIVING_UP.add(giving_up)  # runs to its end, even if this task is cancelled again
        giving_up.add_done_callback(_GIVING_UP.discard)
        await asyncio.shield(giving_up)
        raise


async def _give_up(taking: asyncio.Future[Lock], release: Callable[[], None]) -> None:
    """Once the thread's last statement has returned, release whatever it took."""
    await asyncio.wait([taking])
    if not taking.cancelled():
        taking.exception()  # a failed acquire() released what it took
    await asyncio.to_thread(release)


def needs_session(name: str) -> LockScopeError:
    """The error of a lock taken with ``async with`` that resolved to transaction scope."""
    return LockScopeError(
        f"{name} is taken with 'async with', which needs session scope (Django runs no "
        "transaction across await), but it resolved to transaction scope: use "
        "scope='session', with ADVISORY_CRON['LOCK_DATABASE'] on a direct connection when a "
        "transaction pooler is in the path"
    )
