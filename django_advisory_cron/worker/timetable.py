"""Which ticks a worker wakes for, and which of them it runs.

At start-up a worker looks up each job's latest recorded tick, and ticks that passed since
then (every replica was down) are missed; so are the ticks a worker slept through. Which of
them run is the job's ``catch_up`` policy, decided by
[catchup][django_advisory_cron.jobs.catchup] as for django-q2. A job with no recorded tick
starts with its next tick. A job whose schedule fails to give a tick is dropped, once logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from ..core.schedule_rules import max_runs_ended
from ..exceptions import DatabaseUnavailable, first_line
from ..jobs import calendars, catchup, fanout
from ..jobs.job import Job
from ..run.history import runs_of
from .fleet import run_order

logger = logging.getLogger("django_advisory_cron")

_MICROSECOND = timedelta(microseconds=1)


def next_tick(job: Job[..., object], now: datetime) -> datetime:
    """The job's first tick after ``now``, and not before its ``starts``."""
    schedule = job.schedule
    assert schedule is not None
    if job.starts is not None and now < job.starts:
        now = job.starts - _MICROSECOND
    return schedule.next_tick(now)


def latest_tick(job: Job[..., object], now: datetime) -> datetime:
    schedule = job.schedule
    assert schedule is not None
    return schedule.previous_tick(now)


def off(job: Job[..., object]) -> catchup.OffCalendar | None:
    """Why ``job``'s calendar skips each of some ticks, for its catch-up (``None``: it has
    none)."""
    if not job.calendar:
        return None
    return lambda ticks: calendars.reasons(job, ticks, job.using)


class Timetable:
    """The next tick to wake for of each of one worker's scheduled jobs."""

    def __init__(self, jobs: dict[str, Job[..., object]], identity: str) -> None:
        self.jobs = jobs
        self.identity = identity
        #: The first tick not yet started here, per job; ``None`` until ``plan()``.
        self.upcoming: dict[str, datetime] | None = None
        #: Jobs whose first tick to wake for was missed before this worker started, and the
        #: database time it started at.
        self._missed_at_start: dict[str, datetime] = {}
        #: Jobs whose schedule failed to give a tick: logged once, not scheduled any more.
        self._unschedulable: set[str] = set()

    def plan(self, connection: BaseDatabaseWrapper, now: datetime) -> dict[str, datetime]:
        """The first tick to wake for, per job: the first one missed since the job's latest
        recorded tick (then due at once), else the next one."""
        recorded = self._recorded(connection, list(self.jobs))
        runs = self._runs(connection, list(self.jobs))
        first = {}
        for name, job in self.jobs.items():
            if max_runs_ended(job.max_runs, runs.get(name, 0)):
                continue  # it had its runs
            try:
                missed = catchup.first_missed(job, recorded.get(name), now)
                first[name] = missed or next_tick(job, now)
            except (DatabaseError, DatabaseUnavailable):
                raise
            except Exception as error:  # the schedule's own failure: this job alone
                self._unschedule(job, error)
                continue
            if job.final is not None and first[name] > job.final:
                del first[name]  # its schedule has ended
                continue
            if missed is not None:
                self._missed_at_start[name] = now
        self.upcoming = first
        return first

    def starts(self) -> dict[str, datetime]:
        """When each upcoming tick starts: the tick plus its job's jitter offset (see
        [jitter][django_advisory_cron.core.jitter]), the same on every replica; a per-tenant
        job's at its tick, its tenants each at their own offset (see
        [spread][django_advisory_cron.worker.spread])."""
        assert self.upcoming is not None
        return {
            name: tick if self.jobs[name].per_tenant else self.jobs[name].start_of(tick)
            for name, tick in self.upcoming.items()
        }

    def due(
        self, connection: BaseDatabaseWrapper, names: list[str], now: datetime
    ) -> Iterator[tuple[Job[..., object], list[datetime]]]:
        """The jobs ``names`` (due by ``now``), in this worker's order, each with its ticks to
        run now (a job with none is left out). A job's next tick to wake for is set once the
        caller has started its ticks (asked for the next job, or for none)."""
        upcoming = self.upcoming
        assert upcoming is not None
        recorded = self._recorded_if_behind(connection, names, now)
        runs = self._runs(connection, names)
        for name in run_order(self.identity, names):
            job = self.jobs[name]
            done = max_runs_ended(job.max_runs, runs.get(name, 0))
            if done:
                self.end(name, done)
                continue
            try:
                ticks = self._ticks_due(job, upcoming[name], now, recorded.get(name))
                following = next_tick(job, now)
            except (DatabaseError, DatabaseUnavailable):
                raise
            except Exception as error:  # the schedule's own failure: this job alone
                self._unschedule(job, error)
                del upcoming[name]
                continue
            ticks = [tick for tick in ticks if job.in_window(tick)]
            if ticks and job.calendar:
                ticks = self._on_calendar(connection, job, ticks, now)
            if ticks:
                yield job, ticks
            if job.final is not None and following > job.final:
                self.end(name)
            else:
                upcoming[name] = following

    def end(self, name: str, why: str = "") -> None:
        """Stop waking for ``name``, whose schedule has ended (its ``ends`` or its one-off's
        moment passed, or ``why``: it had its ``max_runs``)."""
        assert self.upcoming is not None
        self.upcoming.pop(name, None)
        logger.info(
            "cronworker %s: job %s has no more ticks: its schedule ended %s",
            self.identity,
            name,
            why or f"at {self.jobs[name].final}",
        )

    def replan(self, name: str, now: datetime) -> None:
        """Wake for ``name`` (added, or its schedule changed) at its first tick after the
        change: a tick before it is never run for it (one of the old schedule may have run),
        and one since then is run now, as the job's catch-up says."""
        assert self.upcoming is not None
        job = self.jobs[name]
        self._missed_at_start.pop(name, None)
        self._unschedulable.discard(name)
        since = job.edited if job.edited is not None and job.edited < now else now
        try:
            first = next_tick(job, since)
        except Exception as error:  # the schedule's own failure: this job alone
            self._unschedule(job, error)
            self.upcoming.pop(name, None)
            return
        if job.final is not None and first > job.final:
            self.end(name)
        else:
            self.upcoming[name] = first

    def drop(self, name: str) -> None:
        """Stop waking for ``name`` (removed, or disabled)."""
        assert self.upcoming is not None
        self.upcoming.pop(name, None)
        self._missed_at_start.pop(name, None)
        self._unschedulable.discard(name)

    def _unschedule(self, job: Job[..., object], error: Exception) -> None:
        """Stop scheduling ``job``, whose schedule failed to give its ticks; log it once."""
        if job.name in self._unschedulable:
            return
        self._unschedulable.add(job.name)
        schedule = getattr(job.schedule, "expression", None) or job.schedule_text
        logger.error(
            "cronworker %s: job %r is not scheduled: its schedule %r gives no tick (%s); fix "
            "the schedule (manage.py check lists schedule problems) and restart cronworker; "
            "its other jobs run as usual",
            self.identity,
            job.name,
            schedule,
            first_line(error),
        )

    def _on_calendar(
        self,
        connection: BaseDatabaseWrapper,
        job: Job[..., object],
        ticks: list[datetime],
        now: datetime,
    ) -> list[datetime]:
        """Those of ``ticks`` that ``job``'s business calendar keeps. Every replica answers
        alike; a skipped tick is logged, and with ``RECORD_SKIPS`` recorded once (its reason
        in the row). A calendar that cannot be read (the ``holidays`` package missing) raises:
        the job is not scheduled, and no tick runs on a day it may skip."""
        kept = []
        for tick, why in calendars.reasons(job, ticks, connection.alias).items():
            if why is None:
                kept.append(tick)
                continue
            logger.info(
                "cronworker %s: job %s, tick %s skipped by its calendar %s: %s",
                self.identity,
                job.name,
                tick.isoformat(),
                job.calendar,
                why,
            )
            try:
                calendars.record_skip(job, tick, why, now, connection.alias)
            except DatabaseError as error:
                logger.warning(
                    "cronworker %s: job %s, tick %s: its calendar skip was not recorded (%s)",
                    self.identity,
                    job.name,
                    tick.isoformat(),
                    first_line(error),
                )
        return kept

    def _runs(self, connection: BaseDatabaseWrapper, names: list[str]) -> dict[str, int]:
        """The runs of their ticks the jobs of ``names`` with ``max_runs`` have had."""
        return runs_of(connection, [n for n in names if self.jobs[n].max_runs is not None])

    def _slept_through(self, name: str, now: datetime) -> bool:
        """Whether ticks of ``name`` passed after the first one not yet started here, while
        this worker was not looking (its schedule's failure is left to ``due``)."""
        assert self.upcoming is not None
        if name in self._missed_at_start or name not in self.upcoming:
            return False
        try:
            return latest_tick(self.jobs[name], now) > self.upcoming[name]
        except Exception:
            return False

    def _recorded_if_behind(
        self, connection: BaseDatabaseWrapper, names: list[str], now: datetime
    ) -> dict[str, datetime]:
        """The latest recorded tick of each of ``names`` that this worker slept through ticks
        of: other replicas may have run some meanwhile. One statement for all of them."""
        behind = [name for name in names if self._slept_through(name, now)]
        return self._recorded(connection, behind) if behind else {}

    def _recorded(self, connection: BaseDatabaseWrapper, names: list[str]) -> dict[str, datetime]:
        """The latest recorded tick of each of ``names`` (see ``catchup.recorded_ticks``); a
        per-tenant job's is the earliest of its tenants' (``name@schema``) that have one, so a
        tenant behind catches up (each tenant's claim skips a tick it already has). One
        statement for all of them."""
        tenants = {
            name: [each.name for each in fanout.split(self.jobs[name])]
            for name in names
            if self.jobs[name].per_tenant
        }
        asked = [name for name in names if name not in tenants]
        asked += [each for each_of in tenants.values() for each in each_of]
        found = catchup.recorded_ticks(connection, asked) if asked else {}
        for name, each_of in tenants.items():
            ticks = [found[each] for each in each_of if each in found]
            if ticks:
                found[name] = min(ticks)
        return found

    def _ticks_due(
        self, job: Job[..., object], first: datetime, now: datetime, recorded: datetime | None
    ) -> list[datetime]:
        """The ticks of ``job`` to run now, oldest first: ``first`` is the earliest not yet
        started here. When ticks were missed (before this worker started, or slept through),
        the job's catch-up policy decides from the run history (``recorded``: the job's latest
        recorded tick, read when it slept through ticks)."""
        started = self._missed_at_start.pop(job.name, None)
        since: list[datetime] = []
        if started is not None:
            # Missed before this worker started; any tick since then is on time.
            plan = catchup.plan(job, first, started, on_time=False, calendar=off(job))
            tick = next_tick(job, started)
            while tick <= now:
                since.append(tick)
                tick = next_tick(job, tick)
        else:
            # Slept through ticks: other replicas may have run some of them meanwhile.
            if latest_tick(job, now) > first and recorded is not None and recorded >= first:
                first = next_tick(job, recorded)
                if first > now:
                    return []
            plan = catchup.plan(job, first, now, calendar=off(job))
        if plan.noteworthy:
            logger.warning("cronworker %s: %s", self.identity, plan.describe())
        return plan.run + since
