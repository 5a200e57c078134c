"""``cronjob backfill``: run again the ticks of a past range that have no run, oldest first.

Each tick goes through the same claim as a scheduled run of it (``execute`` with the tick as
its reference), so a tick runs once whoever else tries it: a second backfill of the range, or
the workers. A backfill waits for the job's lock instead of skipping: while another run of the
job holds it, the tick it would have taken could otherwise be left by both. Each run it starts
is marked ``backfill`` on its row, before its body runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError

from .. import exitcodes, signals
from ..core.schedule import Schedule
from ..core.statuses import TICK_TAKING, RunStatus
from ..db.execute import database_now
from ..jobs import calendars
from ..jobs.job import Job
from ..models import JobRun
from ..ops.control import parse_moment
from ..run.runner import RunResult, execute
from .runs import signals_unwind

#: The most ticks one backfill may run: a larger range is refused, saying how to split it.
MOST = 10_000
#: The width of the progress bar, in characters.
BAR = 20


@dataclass(frozen=True)
class Range:
    """The ticks of a job in ``[start, end]`` and those among them that already have a run."""

    start: datetime
    end: datetime
    ticks: list[datetime]
    taken: frozenset[datetime]
    #: The ticks the job's business calendar skips, and why: never backfilled.
    off_calendar: dict[datetime, str] = field(default_factory=dict)

    @property
    def pending(self) -> list[datetime]:
        """The ticks with no run yet that its calendar keeps, oldest first."""
        return [t for t in self.ticks if t not in self.taken and t not in self.off_calendar]


def moment(flag: str, text: str, now: datetime) -> datetime:
    """``--start`` or ``--end``: an ISO 8601 date-time (in ``TIME_ZONE`` without an offset)
    or a duration back from ``now`` (``2d``: two days ago)."""
    try:
        return parse_moment(text, now, back=True)
    except ValueError as error:
        raise CommandError(f"{flag}: {error}", returncode=exitcodes.USAGE) from None


def plan(job: Job[Any, Any], alias: str, start: datetime, end: datetime) -> Range:
    """The job's ticks in ``[start, end]`` (within its own ``starts``/``ends``) and which of
    them already have a run; ``CommandError`` (exit 2) for a job that cannot be backfilled."""
    schedule = _schedule(job)
    if end < start:
        raise CommandError(
            f"backfill {job.name}: --end ({end.isoformat()}) is before --start "
            f"({start.isoformat()})",
            returncode=exitcodes.USAGE,
        )
    ticks = list(_ticks(schedule, job, start, end))
    if len(ticks) > MOST:
        raise CommandError(
            f"backfill {job.name}: the range holds more than {MOST:,} ticks; split it into "
            "shorter ranges (--start, --end)",
            returncode=exitcodes.USAGE,
        )
    taking = [status.value for status in TICK_TAKING]
    if job.at_most_once:  # its interrupted runs keep their ticks
        taking.append(RunStatus.INTERRUPTED.value)
    taken = frozenset(
        JobRun.objects.using(alias)
        .filter(job=job.name, tick__gte=start, tick__lte=end, status__in=taking)
        .values_list("tick", flat=True)
    )
    off = {t: why for t, why in calendars.reasons(job, ticks, alias).items() if why}
    return Range(start, end, ticks, frozenset(t for t in taken if t is not None), off)


def _schedule(job: Job[Any, Any]) -> Schedule:
    if job.deliver:
        raise CommandError(
            f"backfill {job.name}: a job sent to a task queue (deliver={job.deliver!r}) is "
            "not backfilled here; run its ticks with 'manage.py runlocked --enqueue' instead",
            returncode=exitcodes.USAGE,
        )
    schedule = job.schedule
    if schedule is None:
        raise CommandError(
            f"backfill {job.name}: the job has no schedule, so no ticks to run",
            returncode=exitcodes.USAGE,
        )
    return schedule


def _ticks(
    schedule: Schedule, job: Job[Any, Any], start: datetime, end: datetime
) -> Iterator[datetime]:
    """Ticks in ``[start, end]`` within the job's window, oldest first; one more than
    ``MOST`` at most (enough to refuse the range)."""
    tick = schedule.previous_tick(start)
    if tick < start:
        tick = schedule.next_tick(tick)
    found = 0
    while tick <= end and found <= MOST:
        if job.in_window(tick):
            found += 1
            yield tick
        tick = schedule.next_tick(tick)


def now_of(alias: str) -> datetime:
    """The database's clock: the ranges are read against it, as the workers read theirs."""
    return database_now(alias)


def run(
    job: Job[Any, Any],
    alias: str,
    pending: list[datetime],
    report: Callable[[int, datetime, RunResult], None],
) -> list[RunResult]:
    """Run each of ``pending`` through the claim, oldest first, waiting for the job's lock;
    ``report`` is called after each with its place, its tick and how it ended."""

    def mark(sender: Any, run: RunResult, **kwargs: Any) -> None:
        if run.run_id is not None and run.tick in wanted:
            JobRun.objects.using(alias).filter(pk=run.run_id).update(backfill=True)

    wanted = set(pending)
    uid = f"cronjob-backfill-{id(wanted)}"
    signals.job_started.connect(mark, sender=job, weak=False, dispatch_uid=uid)
    ended: list[RunResult] = []
    try:
        for place, tick in enumerate(pending, 1):
            with signals_unwind(job.timeout):
                result = execute(job, now=tick, wait=math.inf, using=alias)
            ended.append(result)
            report(place, tick, result)
    finally:
        signals.job_started.disconnect(sender=job, dispatch_uid=uid)
    return ended


def bar(done: int, total: int) -> str:
    """``[#######-------------]  7/20``: how far a backfill has come."""
    filled = BAR * done // total if total else BAR
    width = len(str(total))
    return f"[{'#' * filled}{'-' * (BAR - filled)}] {done:>{width}}/{total}"
