"""Which of a job's ticks run after a gap: its ``catch_up`` policy and ``max_lateness``.

One implementation for every scheduler that can fall behind: ``cronworker`` (all replicas were
down, or a worker slept through ticks) and the django-q2 delivery (the clusters were down, or
the queue was backed up). Ticks are judged on the database's clock.

A scheduler that fires for a tick before any later tick has passed runs it **on time**. Ticks
that passed while nothing fired for them are **missed**, and the job's ``catch_up`` (default
the ``CATCH_UP`` setting) decides:

* ``"latest"`` runs the most recent missed tick once and passes over the others;
* ``"all"`` runs the missed ticks in order (at most the ``MAX_CATCH_UP`` most recent);
* ``"none"`` runs none of them; the job goes on with its next tick.

``max_lateness`` comes first, and applies to on-time ticks too: a tick more than that many
seconds late is passed over whatever the policy; a job with a ``jitter`` is late from its
tick's start (the tick plus its offset), not from the tick. Passed-over ticks are logged, not
recorded: nothing ran for them, so they take no tick and leave no row.

Where the missed ticks start:

* ``cronworker`` at start-up: after the job's latest recorded tick
  ([recorded_ticks][django_advisory_cron.jobs.catchup.recorded_ticks]; any row with a tick counts,
  skips included, a pause decides every tick up to its end, and neither the edit of its
  schedule nor the reset of its override is crossed). A job with **no recorded tick** has
  missed nothing: the first worker ever
  to run it starts with its next tick, and nothing from before it started runs.
* ``cronworker`` waking after ticks passed (a suspended VM, a long pause): after the tick it
  woke for, or after the latest recorded tick when other replicas ran some of them meanwhile.
* django-q2: at the tick the late delivery was meant for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import CatchUp, app_settings
from ..core.jitter import start_of
from ..core.schedule import Schedule
from ..db import sql
from ..db.execute import fetch_all


class CatchingUp(Protocol):
    """What deciding a job's missed ticks needs of it (a
    [Job][django_advisory_cron.jobs.job.Job])."""

    @property
    def name(self) -> str: ...

    @property
    def schedule(self) -> Schedule | None: ...

    @property
    def catch_up(self) -> CatchUp | None: ...

    @property
    def max_lateness(self) -> float | None: ...

    @property
    def jitter(self) -> float | None: ...

    @property
    def edited(self) -> datetime | None: ...


#: At most this many missed ticks are considered: run (``"all"``) or passed over.
MAX_CATCH_UP = 64

_MICROSECOND = timedelta(microseconds=1)


def recorded_ticks(connection: BaseDatabaseWrapper, names: list[str]) -> dict[str, datetime]:
    """The latest tick each named job has a row for (skips included), or the end of its last
    pause or its last reset when later; jobs with neither a tick nor a pause are left out. One
    statement for all of them.
    ``prune_jobruns`` keeps the rows it reads."""
    rows = fetch_all(connection, sql.latest_recorded_ticks(names))
    return {job: tick for job, tick in rows if tick is not None}


def policy_of(job: CatchingUp) -> CatchUp:
    """The job's ``catch_up``, else the ``CATCH_UP`` setting."""
    return job.catch_up or app_settings.CATCH_UP


def first_missed(job: CatchingUp, recorded: datetime | None, now: datetime) -> datetime | None:
    """The first tick after ``recorded`` (or after the job's schedule was last edited, when
    later) when it has passed by ``now``, else ``None`` (nothing missed, or no recorded tick:
    a job that never ran has missed nothing, but for a one-off: its moment, unless it came
    before its schedule's last change)."""
    if recorded is None:
        once = job.schedule.last if job.schedule is not None else None
        if once is None or once > now or (job.edited is not None and job.edited >= once):
            return None
        return once
    if job.edited is not None and job.edited > recorded:
        # Its schedule changed since: only the new schedule's ticks after the change count.
        recorded = job.edited
    schedule = job.schedule
    assert schedule is not None
    tick = schedule.next_tick(recorded)
    return tick if tick <= now else None


@dataclass(frozen=True)
class Plan:
    """What to do with a job's ticks from ``first`` up to ``now``."""

    job: str
    policy: CatchUp
    max_lateness: float | None
    #: The ticks to run, in order.
    run: list[datetime]
    #: Missed ticks the policy passes over.
    passed_over: list[datetime] = field(default_factory=list)
    #: Ticks passed over for being more than ``max_lateness`` seconds old.
    too_late: list[datetime] = field(default_factory=list)
    #: The missed ticks looked at (``[]`` when the tick was on time), oldest first.
    missed: list[datetime] = field(default_factory=list)
    #: Missed ticks the job's business calendar skips, and why: never run, whatever the
    #: policy (the policy picks among the others).
    off_calendar: dict[datetime, str] = field(default_factory=dict)

    @property
    def skipped(self) -> list[datetime]:
        """Every tick passed over, oldest first."""
        return sorted(self.passed_over + self.too_late)

    @property
    def noteworthy(self) -> bool:
        """Ticks were missed or passed over: worth a log line."""
        return bool(self.missed or self.too_late)

    def describe(self) -> str:
        """One log line: what was missed, what runs, what is passed over and why."""
        parts = []
        if self.missed:
            span = _iso(self.missed[0])
            if len(self.missed) > 1:
                span += f" to {_iso(self.missed[-1])}"
            parts.append(f"{len(self.missed)} missed tick(s) ({span})")
        runs = ", ".join(map(_iso, self.run)) or "nothing"
        parts.append(f"catch_up={self.policy!r} runs {runs}")
        if self.passed_over:
            parts.append(f"passes over {len(self.passed_over)}")
        if self.too_late:
            parts.append(
                f"passes over {len(self.too_late)} more than max_lateness="
                f"{self.max_lateness:g}s late"
            )
        if self.off_calendar:
            parts.append(f"skips {len(self.off_calendar)} its calendar skips")
        return f"job {self.job}: " + "; ".join(parts)


def _iso(tick: datetime) -> str:
    return tick.isoformat(timespec="seconds")


#: Why a job's business calendar skips each of some ticks (``None``: it runs); see
#: [calendars][django_advisory_cron.jobs.calendars.reasons].
OffCalendar = Callable[[list[datetime]], dict[datetime, "str | None"]]


def plan(
    job: CatchingUp,
    first: datetime,
    now: datetime,
    *,
    on_time: bool = True,
    calendar: OffCalendar | None = None,
) -> Plan:
    """Split the job's ticks from ``first`` (the earliest not yet run) up to ``now``.

    With ``on_time`` the scheduler fired for ``first``: while no later tick has passed, it
    runs (unless it is more than ``max_lateness`` late). Otherwise, or once later ticks have
    passed, the ticks from ``first`` on are missed and the job's policy decides, among those
    its business ``calendar`` does not skip (an on-time tick it skips is the caller's to say).
    """
    schedule = job.schedule
    assert schedule is not None
    policy, lateness = policy_of(job), job.max_lateness

    def too_old(tick: datetime) -> bool:
        if lateness is None:
            return False
        return (now - start_of(job.name, tick, job.jitter)).total_seconds() > lateness

    latest = schedule.previous_tick(now)
    if on_time and latest <= first:
        if too_old(first):
            return Plan(job.name, policy, lateness, run=[], too_late=[first])
        return Plan(job.name, policy, lateness, run=[first])
    missed: list[datetime] = []
    tick = latest
    while tick >= first and len(missed) < MAX_CATCH_UP:
        missed.append(tick)
        tick = schedule.previous_tick(tick - _MICROSECOND)
    missed.reverse()
    off: dict[datetime, str] = {}
    if calendar is not None and missed:
        off = {tick: why for tick, why in calendar(missed).items() if why is not None}
    candidates = [tick for tick in missed if tick not in off]
    too_late = [tick for tick in candidates if too_old(tick)]
    fresh = candidates[len(too_late) :]  # ascending: the old ones come first
    if policy == "all":
        run = fresh
    elif policy == "latest":
        run = fresh[-1:]
    else:
        run = []
    return Plan(
        job.name,
        policy,
        lateness,
        run=run,
        passed_over=fresh[: len(fresh) - len(run)],
        too_late=too_late,
        missed=missed,
        off_calendar=off,
    )
