"""An ``async with advisory_lock(..., wait=N)`` cancelled while it waits (what an ASGI request
timeout or a client that went away does to the view's task) stops waiting and keeps nothing:
the lock, freed later by its holder, is not taken by the abandoned wait, so this process and
every other one can take it at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from django_advisory_cron import LockKey, advisory_lock
from django_advisory_cron.lock.polling import MAX_POLL_INTERVAL
from tests.pglocks import holders
from tests.test_async_jobs import _trying
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


async def _stays_free(observer: Any, key: LockKey) -> None:
    """An abandoned wait takes a freed lock at its next try (at most ``MAX_POLL_INTERVAL``
    apart): no holder for three of them."""
    deadline = time.monotonic() + 3 * MAX_POLL_INTERVAL
    while time.monotonic() < deadline:
        assert not holders(observer, key), "the abandoned wait took the lock"
        await asyncio.sleep(0.05)


def test_a_cancelled_async_wait_keeps_no_lock(raw_connect: Any) -> None:
    name = "async-cancelled"
    key = LockKey(name)
    holder, observer, replica = raw_connect(), raw_connect(), raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", key.params)

    async def waiting() -> None:
        async with advisory_lock(name, scope="session", wait=10):
            pytest.fail("the cancelled wait entered its body")

    async def cancelled_then_again() -> tuple[float, bool]:
        task = asyncio.create_task(asyncio.wait_for(waiting(), timeout=30))
        # Cancelled once its lock connection has tried the lock: inside its wait.
        await asyncio.to_thread(wait_for, lambda: _trying(observer), 10)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - started
        holder.execute("SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", key.params)
        await _stays_free(observer, key)
        async with advisory_lock(name, scope="session") as again:
            return took, again.acquired

    took, acquired_again = asyncio.run(cancelled_then_again())
    print(f"cancel returned in {took:.3f} s; a new async with acquired: {acquired_again}")
    assert acquired_again
    assert not holders(observer, key)
    # Another process's connection takes it too.
    taken = replica.execute("SELECT pg_try_advisory_lock(%(lock_ns)s, %(lock_id)s)", key.params)
    assert taken.fetchone() == (True,)
    assert holders(observer, key) == [replica.info.backend_pid]


def test_a_request_timeout_around_the_wait_keeps_no_lock(raw_connect: Any) -> None:
    """The same through ``asyncio.wait_for``'s timeout, the way a server bounds a request."""
    name = "async-timed-out"
    key = LockKey(name)
    holder, observer = raw_connect(), raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", key.params)

    async def timed_out() -> None:
        async def waiting() -> None:
            async with advisory_lock(name, scope="session", wait=10):
                pytest.fail("the timed-out wait entered its body")

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiting(), timeout=0.3)
        holder.execute("SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", key.params)
        await _stays_free(observer, key)

    asyncio.run(timed_out())
