"""``async def`` jobs, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "async_tasks"}'``:
they use Django's async ORM in their bodies."""

import asyncio
import os
from datetime import timedelta
from typing import Any

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


@locked_task(name="async_stopped_in_asgiref")
async def async_stopped_in_asgiref() -> None:
    """Sends its own process SIGTERM just as asgiref starts copying a ``sync_to_async`` call's
    context back (the moment a stop once left asgiref half-updated), then awaits for a minute."""
    import signal
    import sys

    from asgiref import sync

    assert hasattr(sync, "_restore_context"), "asgiref no longer has _restore_context"

    def stop_there(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "_restore_context":
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGTERM)

    sys.setprofile(stop_there)
    try:
        await Marker.objects.acreate(job="async_stopped_in_asgiref", pid=os.getpid())
    finally:
        sys.setprofile(None)
    await asyncio.sleep(60)
