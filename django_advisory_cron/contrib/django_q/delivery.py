"""The function django-q2 calls for a synced schedule: ``run_scheduled()``.

django-q2 passes the time it *meant* to run the schedule (the row's ``next_run`` before the
scheduler advances it) through the row's ``intended_date_kwarg``, so every delivery of one
tick — several clusters, a retry while the first delivery still runs, a failed task
redelivered — claims the same ``(job, tick)`` record, and each delivery after the first
skips. Which ticks a late delivery runs is decided by the job's ``catch_up`` and
``max_lateness``, in [catchup][django_advisory_cron.jobs.catchup]. A job with a ``jitter`` waits,
in the task, for its tick's start (the tick plus the offset every replica computes alike), as
``cronworker`` and ``runlocked`` do: django-q2 fires every schedule at its minute.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ...conf import app_settings
from ...core.jitter import start_of
from ...db.aliases import lock_database
from ...db.execute import database_now
from ...exceptions import UnknownJob
from ...jobs import calendars
from ...jobs.catchup import Plan, plan
from ...jobs.job import Job, registry
from ...models import RunStatus
from ...run.runner import RunResult, execute

logger = logging.getLogger("django_advisory_cron")

#: The dotted path django-q2 calls. It is stored in every synced ``Schedule.func`` (and synced
#: rows are recognised by it), so it names the package, where ``run_scheduled()`` is
#: re-exported, and must never change.
RUNNER = "django_advisory_cron.contrib.django_q.run_scheduled"
#: The keyword argument through which django-q2 passes the intended run time.
INTENDED_KWARG = "intended"


def _parse_intended(value: str | datetime | None) -> datetime | None:
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if moment.tzinfo is None:
        from django.utils import timezone

        moment = timezone.make_aware(moment)
    return moment


def _run(
    job: Job[..., object],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    now: datetime | None = None,
) -> RunResult:
    """Run ``job``; a failure is recorded and re-raised, never as a stop of the q2 worker."""
    return execute(job, args=args, kwargs=kwargs, now=now).reraise_in_task()


def _summary(result: RunResult) -> dict[str, Any]:
    return {
        "tick": result.tick.isoformat() if result.tick else None,
        "status": RunStatus(result.status).value,
        "run_id": result.run_id,
    }


def run_scheduled(
    job_name: str,
    *args: Any,
    intended: str | datetime | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Entry point django-q2 calls for a synced schedule; returns a summary of what ran.

    ``intended`` is the time django-q2 meant to run the schedule (ISO 8601); the run claims the
    tick nearest to it, not to the moment a worker picked the task up. Extra ``args`` and
    ``kwargs`` (from a hand-made schedule) are passed to the job. A job failure is recorded and
    re-raised so django-q2 lists it (a ``SystemExit`` of the job's own as ``JobFailed``, so the
    q2 worker process does not stop); its redelivery finds the tick taken and skips.
    """
    try:
        job = registry.get(job_name)
    except UnknownJob:
        # Raising would make django-q2 redeliver the task forever (failures are not acked).
        logger.error(
            "django-q2 delivered unknown job %r; remove its schedule (sync_schedules --prune)",
            job_name,
        )
        return {"job": job_name, "runs": [], "error": "unknown job"}
    moment = _parse_intended(intended)
    summary: dict[str, Any] = {
        "job": job.name,
        "intended": moment.isoformat() if moment else None,
        "runs": [],
    }
    schedule = job.schedule
    if moment is None or schedule is None:
        summary["runs"].append(_summary(_run(job, args, kwargs)))
        return summary
    max_skew = app_settings.MAX_SKEW
    tick = schedule.nearest_tick(moment, max_skew)
    if tick is None:
        logger.warning(
            "job %s: django-q2 meant to run it at %s, which is no tick of %r; running it "
            "unscheduled (is its Schedule out of date? run sync_schedules)",
            job.name,
            moment.isoformat(),
            schedule.expression,
        )
        summary["runs"].append(_summary(_run(job, args, kwargs, now=moment)))
        return summary
    now = database_now(lock_database(job.using))
    read_at = time.monotonic()
    decided = plan(job, tick, now, calendar=_off_calendar(job))
    if job.calendar:  # as cronworker: no tick its calendar skips runs, a late one neither
        decided = _on_calendar(job, decided, now, summary)
    if decided.noteworthy:
        logger.warning(
            "django-q2 delivered tick %s late (database time %s): %s",
            tick.isoformat(),
            now.isoformat(),
            decided.describe(),
        )
    summary["passed_over"] = [missed.isoformat() for missed in decided.skipped]
    for run_tick in decided.run:
        _wait_for_start(job, run_tick, now + timedelta(seconds=time.monotonic() - read_at))
        summary["runs"].append(_summary(_run(job, args, kwargs, now=run_tick)))
    return summary


def _off_calendar(job: Job[..., object]) -> Callable[[list[datetime]], dict[datetime, Any]] | None:
    """Why ``job``'s calendar skips each of some ticks (``None``: it has none)."""
    if not job.calendar:
        return None
    return lambda ticks: calendars.reasons(job, ticks, job.using)


def _on_calendar(
    job: Job[..., object], decided: Plan, now: datetime, summary: dict[str, Any]
) -> Plan:
    """``decided`` without the ticks ``job``'s calendar skips (logged; recorded once with
    ``RECORD_SKIPS``), which the summary lists under ``off_calendar``."""
    skips = {t: why for t, why in calendars.reasons(job, decided.run, job.using).items() if why}
    for skipped, why in skips.items():
        logger.info("job %s, tick %s skipped by its calendar: %s", job.name, skipped, why)
        calendars.record_skip(job, skipped, why, now, job.using)
    summary["off_calendar"] = [t.isoformat() for t in sorted({*decided.off_calendar, *skips})]
    return dataclasses.replace(decided, run=[t for t in decided.run if t not in skips])


def _wait_for_start(job: Job[..., object], tick: datetime, now: datetime) -> None:
    """Sleep until ``tick``'s start when the job has a jitter and that start is still to come
    (``now``: the database's time, advanced on the monotonic clock). The wait counts towards
    ``Q_CLUSTER["timeout"]``: check W062 says when a jitter with the job's ``max_runtime``
    outlasts it."""
    if not job.jitter:
        return
    delay = (start_of(job.name, tick, job.jitter) - now).total_seconds()
    if delay > 0:
        time.sleep(delay)
