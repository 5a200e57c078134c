"""A worker's jobs kept in step with the schedules kept in the database, without a restart.

A write to the schedules' table notifies the workers that LISTEN (a trigger, migration 0010),
and each claim's [Sighting][django_advisory_cron.lock.shared.Sighting] carries the schedules'
version, so a change is seen within a second on a direct connection at no cost; behind a
transaction pooler, where a worker cannot LISTEN, it looks every ``SCHEDULE_POLL`` seconds
unless a claim brought the version meanwhile. A worker whose jobs all live in code sends no
statement for this while nothing changes.

What a change does (docs: "Schedules as data"):

- an added schedule, or one whose timing changed, is woken for at its first tick after the
  change: a tick before the change never runs for it (the old schedule may have run it), and
  missed ticks after it run as its catch-up says; a tick already recorded is taken whatever
  the schedule says now (the ``(job, tick)`` row);
- a removed or disabled schedule gets no next tick; a run of it still going finishes;
- other edits (its description, its arguments) apply from its next run.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ..db import sql
from ..jobs import catalog
from ..jobs.definitions import one_line
from ..jobs.job import Job
from ..lock.shared import ClaimConnection
from .clock import Wakeup
from .narration import DETAILS, ERRORS, Narrator
from .requests import RunRequests
from .timetable import Timetable

logger = logging.getLogger("django_advisory_cron")

#: Seconds between looks at the database's schedules when the worker cannot LISTEN (behind a
#: transaction pooler) and no claim brought their version meanwhile.
SCHEDULE_POLL = 5.0


def _timing(job: Job[..., Any]) -> tuple[object, ...]:
    """What decides a job's ticks."""
    return (job.cron, job.every, job.timezone, job.starts, job.ends)


class Following:
    """Keeps a worker's jobs (``jobs``: scheduled ones; ``manual``: every one, for "run now")
    in step with the catalog: the jobs it was ``given`` and, with ``everything``, every job
    the catalog has."""

    def __init__(
        self,
        given: dict[str, Job[..., Any]],
        *,
        everything: bool,
        jobs: dict[str, Job[..., Any]],
        manual: dict[str, Job[..., Any]],
        timetable: Timetable,
        wakeup: Wakeup,
        identity: str,
        requests: RunRequests,
        narrator: Narrator,
    ) -> None:
        self._given = dict(given)
        self._narrator = narrator
        self._everything = everything
        self._jobs = jobs
        self._manual = manual
        self._timetable = timetable
        self._wakeup = wakeup
        self._identity = identity
        self._requests = requests
        #: The version of the schedules last read (``None``: not read yet).
        self.version: str | None = None
        self._read_at = 0.0
        self._broken: dict[str, str] = {}

    def load(self, connection: BaseDatabaseWrapper, now: datetime | None) -> None:
        """Read the catalog and apply it; ``now`` is ``None`` before the first plan."""
        found = catalog.read(connection)
        self.version, self._read_at = found.version, time.monotonic()
        self._apply(found, now)

    def follow(self, presence: ClaimConnection, now: datetime, *, listening: bool) -> None:
        """Reload when the schedules changed: notified, a claim saw another version, or (not
        listening) ``SCHEDULE_POLL`` seconds passed without a claim saying."""
        heard = self._wakeup.heard(sql.SCHEDULES_CHANNEL)
        seen = presence.sighting
        newer = seen is not None and seen.at > self._read_at and seen.schedules != self.version
        latest = max(self._read_at, seen.at if seen is not None else 0.0)
        polled = not listening and time.monotonic() - latest >= SCHEDULE_POLL
        if heard or newer or polled:
            with presence.turn() as connection:
                self.load(connection, now)

    def _wanted(self, found: catalog.Catalog) -> dict[str, Job[..., Any]]:
        names = set(self._given) | (set(found.jobs) if self._everything else set())
        wanted: dict[str, Job[..., Any]] = {}
        for name in sorted(names):
            if name in found.jobs:
                wanted[name] = found.jobs[name]
            elif self._given[name].source != "database":
                wanted[name] = self._given[name]  # a job this process made, not registered
        return wanted

    def _apply(self, found: catalog.Catalog, now: datetime | None) -> None:
        for name, why in found.broken.items():
            if self._broken.get(name) != why and (self._everything or name in self._given):
                said = (
                    f"schedule {one_line(name)} is not run: {why}; fix or remove it in the "
                    "admin or with manage.py cronjob"
                )
                logger.error("cronworker %s: %s", self._identity, said)
                self._narrator.say(ERRORS, f"cronworker: {said}")
        self._broken = dict(found.broken)
        wanted = self._wanted(found)
        self._manual.clear()
        self._manual.update(wanted)
        self._requests.jobs = sorted(wanted)
        scheduled = {
            name: job for name, job in wanted.items() if job.schedule is not None and job.enabled
        }
        if now is None:
            self._jobs.clear()
            self._jobs.update(scheduled)
            return
        for name in [name for name in self._jobs if name not in scheduled]:
            del self._jobs[name]
            self._timetable.drop(name)
            said = (
                f"job {name} is no longer scheduled (removed or disabled); a run of it still "
                "going finishes"
            )
            logger.info("cronworker %s: %s", self._identity, said)
            self._narrator.say(DETAILS, f"cronworker: {said}")
        for name, job in scheduled.items():
            before = self._jobs.get(name)
            self._jobs[name] = job
            if before is None or _timing(before) != _timing(job):
                self._timetable.replan(name, now)
                upcoming = self._timetable.upcoming or {}
                said = (
                    f"job {name} {'scheduled' if before is None else 'rescheduled'}: "
                    f"{job.schedule_text}, first tick "
                    f"{upcoming.get(name, 'none (its schedule has ended)')}"
                )
                logger.info("cronworker %s: %s", self._identity, said)
                self._narrator.say(DETAILS, f"cronworker: {said}")
