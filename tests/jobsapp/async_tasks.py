"""``async def`` jobs, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "async_tasks"}'``:
they use Django's async ORM in their bodies."""

import asyncio
import os
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(name="async_mark")
async def async_mark(note: str = "") -> str:
    """Writes a marker through the async ORM and awaits a little."""
    await asyncio.sleep(0.05)
    await Marker.objects.acreate(job="async_mark", pid=os.getpid(), note=note)
    return note


@locked_task(name="async_hold")
async def async_hold() -> None:
    """Marks its start, then awaits for a minute: the tests stop it."""
    await Marker.objects.acreate(job="async_hold", pid=os.getpid())
    await asyncio.sleep(60)


@locked_task(name="async_slow", timeout=1)
async def async_slow() -> None:
    """Awaits past its timeout."""
    await asyncio.sleep(30)


@locked_task(name="async_every", every=timedelta(seconds=2))
async def async_every() -> None:
    """Every 2 s under cronworker."""
    await Marker.objects.acreate(job="async_every", pid=os.getpid())
