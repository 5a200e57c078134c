"""How a run calls its job's function: once, or again after a failure its retry policy
retries (see [retries][django_advisory_cron.core.retries]) while there is room before its
next tick and its lock is held; an ``async def`` function awaited to its end in an event loop
of the run's thread."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from django.db import transaction

from ..core.retries import RetryPolicy
from ..core.schedule import Schedule
from ..exceptions import LockLost, first_line
from ..lock.advisory import AdvisoryLock
from . import async_body, history

logger = logging.getLogger("django_advisory_cron")


class Named(Protocol):
    """A job as the signals of its runs name it (their sender)."""

    @property
    def name(self) -> str: ...


class Body(Named, Protocol):
    """What calling a job's body needs of the job (a [Job][django_advisory_cron.jobs.job.Job])."""

    @property
    def func(self) -> Callable[..., Any]: ...

    @property
    def schedule(self) -> Schedule | None: ...

    @property
    def retry(self) -> RetryPolicy | None: ...

    @property
    def max_lateness(self) -> float | None: ...


def call_body(
    job: Body,
    lock: AdvisoryLock,
    run: history.Run,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Call the job's function, again after a failure its retry policy retries while there is
    room before its next tick: under the same lock, in the same run, and never once the lock
    is lost (the back-off wakes then and raises ``LockLost``). In transaction scope
    each attempt has a savepoint of its own, so a failed attempt's work is rolled back before
    the next one."""
    policy = job.retry
    if policy is None:
        return _call(job.func, args, kwargs)
    while True:
        try:
            if lock.in_transaction:
                with transaction.atomic(using=lock.using):
                    return _call(job.func, args, kwargs)
            return _call(job.func, args, kwargs)
        except Exception as error:
            failed = run.attempts
            delay = policy.delay(failed)
            if lock.lost or not policy.retries_after(failed, error):
                raise
            why = _no_room(job, lock, run, delay)
            if why:
                logger.warning("job %s: attempt %d failed; not retried: %s", job.name, failed, why)
                raise
            raised = f"{type(error).__name__}: {first_line(error)}"
            run.failed_attempts.append(f"attempt {failed}: {raised}")
            logger.warning(
                "job %s: attempt %d of %d failed (%s); retrying in %.1f s",
                job.name,
                failed,
                policy.retries + 1,
                raised,
                delay,
            )
            # The back-off wakes on a lost lock: another process may hold it by now.
            if lock.loss.wait(delay):
                why = f"its lock was lost before attempt {failed + 1}"
                logger.warning("job %s: attempt %d failed; not retried: %s", job.name, failed, why)
                raise LockLost(f"job {job.name}: {why}; not retried") from error
            run.attempts += 1


def _call(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call the job's function; an ``async def`` one is awaited to its end (see
    [async_body][django_advisory_cron.run.async_body])."""
    if inspect.iscoroutinefunction(func):
        return async_body.run_to_end(func, args, kwargs)
    return func(*args, **kwargs)


def _no_room(job: Body, lock: AdvisoryLock, result: history.Run, delay: float) -> str:
    """Why an attempt ``delay`` seconds from now would start too late ("" when it would not):
    past the job's next tick, or more than its ``max_lateness`` after its tick. Judged on the
    database's clock, from the time the run was claimed."""
    tick, schedule = result.tick, job.schedule
    if tick is None or schedule is None or result.reference is None:
        return ""
    start = result.reference + timedelta(
        seconds=time.monotonic() - (lock.acquired_at or time.monotonic()) + delay
    )
    following = schedule.next_tick(tick)
    if start >= following:
        return f"its next tick ({following}) comes first"
    lateness = job.max_lateness
    if lateness is not None and start > tick + timedelta(seconds=lateness):
        return f"it would start more than max_lateness={lateness:g}s after its tick"
    return ""
