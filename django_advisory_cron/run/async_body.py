"""An ``async def`` job's body, awaited to its end in an event loop of the run's thread (a
runner's thread has none running), so that a stop signal or the job's timeout reaches it as it
reaches a sync body.

In the main thread a stop signal's handler raises wherever it lands. Landing in the event
loop's machinery or in asgiref's (between the steps of a ``sync_to_async`` call), the exception
would leave them half-updated: the next ``sync_to_async`` call then fails ("Single thread
executor already being used, would deadlock") and the run is recorded as failed, its stop lost.
There, what the handler raises cancels the job's task instead, and is raised once the task has
ended; in the job's own code (a blocking call in an async body) it is raised at once, as for a
sync job, and so is a second stop while the first one waits."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import asgiref
from asgiref.sync import sync_to_async
from django.db import connections

from . import handlers

#: The event loop's code: a handler landing there (the loop waits, or steps a task) defers.
_LOOP = (os.path.dirname(asyncio.__file__) + os.sep, selectors.__file__)
#: asgiref's code: a handler landing in it, or in code it calls in this thread, defers.
_ASGIREF = os.path.dirname(asgiref.__file__) + os.sep


@dataclass
class _Stops:
    """The job's task, once it runs, and the stop a handler raised while it did."""

    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    raised: list[BaseException] = field(default_factory=list)


def run_to_end(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Await ``func(*args, **kwargs)`` to its end in a new event loop; a stop signal that lands
    in the loop's or asgiref's code cancels it, and is raised when it has ended."""
    stops = _Stops()
    with _deferring_stops(stops):
        try:
            result = asyncio.run(_until_done(func, args, kwargs, stops))
        except BaseException as ended:
            if stops.raised and ended is not stops.raised[0]:
                raise stops.raised[0] from None
            raise
    if stops.raised:
        raise stops.raised[0]
    return result


async def _until_done(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], stops: _Stops
) -> Any:
    stops.loop, stops.task = asyncio.get_running_loop(), asyncio.current_task()
    try:
        return await func(*args, **kwargs)
    finally:
        stops.task = None
        # The body's async ORM queries ran in asgiref's thread for sync code: close the
        # connections they opened there, as Django does when a request ends.
        await sync_to_async(connections.close_all)()


def _deferring_stops(stops: _Stops) -> AbstractContextManager[None]:
    """In the main thread, wrap each Python signal handler so that what it raises in the
    loop's or asgiref's code cancels the job's task (see
    [handlers][django_advisory_cron.run.handlers])."""

    def wrapped(handler: Any) -> Any | None:
        return _deferring(handler, stops) if callable(handler) else None

    return handlers.swapped(signal.valid_signals(), wrapped)


def _deferring(handler: Callable[[int, FrameType | None], Any], stops: _Stops) -> Any:
    def deferred(signum: int, frame: FrameType | None) -> None:
        try:
            handler(signum, frame)
        except BaseException as stop:
            loop, task = stops.loop, stops.task
            if stops.raised or loop is None or task is None or not _in_machinery(frame):
                raise
            stops.raised.append(stop)
            loop.call_soon_threadsafe(task.cancel)

    return deferred


def _in_machinery(frame: FrameType | None) -> bool:
    """Whether a handler interrupted the event loop's code, or asgiref's at any depth."""
    if frame is not None and frame.f_code.co_filename.startswith(_LOOP):
        return True
    while frame is not None:
        if frame.f_code.co_filename.startswith(_ASGIREF):
            return True
        frame = frame.f_back
    return False
