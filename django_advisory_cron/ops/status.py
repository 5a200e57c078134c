"""The health of every registered job, shared by the "Jobs" admin page and ``cronstatus``.

Two statements whatever the number of jobs, after the catalog's: one for the run history
(each job's last run, its last success and, for the metrics, its runs per status over a
window), the jobs' states (paused, run now) and, for the pages and commands that show them, the
live workers; and one for the advisory locks our jobs hold or wait for.

A scheduled job is *overdue* when the latest tick that should have finished by now (ticks older
than ``MAX_SKEW + OVERDUE_GRACE``) has no successful run at or after it, and the job is not
running right now. Comparing against the schedule's own ticks, rather than a fixed interval,
keeps irregular schedules (weekdays only, the 1st of the month) from raising false alarms. A
job that has never run is reported as such but not as overdue: a fresh deployment is healthy.
*Failing*: its last run failed or lost its lock. *Stuck*: its lock is held longer than its
``max_runtime`` (or ``STALE_AFTER``). A paused job is never overdue.

A job with a lateness target (``late_after``) is *late*, before it is overdue, when its last
run that had a tick started more than the target after it, or when a tick more than the
target ago has no run yet. A job that never ran on a tick, a paused or disabled job and an
overdue one are not late: the first is a fresh deployment, the others say more.

A project that runs its schedules with ``cronworker`` says how many workers it expects
(``EXPECT_WORKERS``): with scheduled jobs and fewer live workers than that, nothing would run
them, and the project is unhealthy whatever each job's own history says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.utils import timezone

from ..conf import app_settings
from ..core.once import Once
from ..core.schedule import Every, Schedule
from ..core.schedule_rules import max_runs_ended
from ..core.statuses import FAILING, SKIPS
from ..db import reads
from ..db.aliases import lock_database
from ..db.execute import fetch_all
from ..exceptions import InvalidSchedule
from ..jobs import calendars, catalog, fanout
from ..jobs.job import Job
from ..models import HeldLock, JobRun, JobState
from ..run.history import runs_of
from ..worker.fleet import PRESENCE_NAME, LiveWorker, live_workers, read_workers
from . import control
from .charts import human_duration
from .describe import describe
from .heldlocks import held_locks

PROBLEMS = ("overdue", "late", "stuck", "failing")

#: The bounds (seconds) a run's lateness, from its tick to its start, is counted at or below.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(frozen=True)
class Lateness:
    """How late a job's runs with a tick started, within a window: a histogram."""

    #: ``(bound, runs at or below it)`` for each of ``LATENESS_BUCKETS``, cumulative.
    at_or_below: tuple[tuple[float, int], ...]
    runs: int
    seconds: float

    @classmethod
    def read(cls, buckets: dict[str, int], seconds: float | None) -> Lateness:
        """From the statement's answer: per number of bounds a run is at or below (the
        largest bounds first), how many runs."""
        counts = {int(key): value for key, value in buckets.items()}
        size = len(LATENESS_BUCKETS)
        at_or_below = tuple(
            (bound, sum(n for above, n in counts.items() if above >= size - index))
            for index, bound in enumerate(LATENESS_BUCKETS)
        )
        return cls(at_or_below, sum(counts.values()), float(seconds or 0))


@dataclass
class JobStatus:
    """What is known about one registered job right now."""

    job: Job[Any, Any]
    now: datetime
    last_run: JobRun | None = None
    last_success: datetime | None = None
    locks: list[HeldLock] = field(default_factory=list)
    schedule_error: str = ""
    #: Runs per status started within the window ``job_statuses`` was asked for, else ``None``.
    run_counts: dict[str, int] | None = None
    #: What an operator said about the job (paused, run requested), if anything.
    state: JobState | None = None
    #: How late its runs started within the window ``job_statuses`` was asked for.
    lateness: Lateness | None = None
    #: The tick and the start of its last run that had a tick (read for a job with a
    #: lateness target only).
    last_ticked: tuple[datetime, datetime] | None = None
    #: How many runs of its ticks it had (read for a job with ``max_runs`` only).
    runs: int | None = None

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def schedule(self) -> Schedule | None:
        try:
            return self.job.schedule
        except InvalidSchedule as error:
            self.schedule_error = str(error)
            return None

    @cached_property
    def schedule_description(self) -> str:
        schedule = self.schedule
        if schedule is None:
            return self.schedule_error or "unscheduled"
        if isinstance(schedule, Every):
            return schedule.expression  # real time: no time zone applies
        if isinstance(schedule, Once):
            return schedule.describe()
        return f"{describe(schedule.expression)} ({schedule.zone_name})"

    @property
    def zone(self) -> str | None:
        """The zone of a cron schedule's ticks (the job's own, else ``TIME_ZONE``); ``None``
        for an interval or no schedule."""
        schedule = self.schedule
        return None if schedule is None or isinstance(schedule, Every) else schedule.zone_name

    @cached_property
    def next_tick(self) -> datetime | None:
        """Its next tick (``None``: no schedule, or it is done)."""
        schedule = self.schedule
        if schedule is None or self.done:
            return None
        tick = calendars.kept_tick(self.job, schedule, self.now, ahead=True, using=self.job.using)
        if tick is None:
            return None
        final = self.job.final
        return None if final is not None and tick > final else tick

    @cached_property
    def done(self) -> str:
        """Why its schedule has no tick to come, or ``""``: a one-off whose moment passed, an
        ``ends`` passed, or ``max_runs`` runs had. A done schedule is never overdue or late."""
        job, schedule = self.job, self.schedule
        if schedule is None:
            return ""
        ended = max_runs_ended(job.max_runs, self.runs or 0)
        if ended:
            return f"done {ended}"
        final = job.final
        if final is not None and final < self.now and schedule.next_tick(self.now) > final:
            return "done: its one-off moment passed" if final == schedule.last else "done: it ended"
        return ""

    @property
    def paused(self) -> str:
        """``paused by ... until ...: why`` while the job is paused, else ``""``."""
        if self.state is None or not control.is_paused(self.state, self.now):
            return ""
        return control.describe_pause(self.state)

    @property
    def run_requested(self) -> datetime | None:
        """When a "run now" was requested that no worker has started yet."""
        return None if self.state is None else self.state.run_requested

    @property
    def holder(self) -> HeldLock | None:
        """The granted lock of this job, if someone holds it now."""
        return next((lock for lock in self.locks if lock.granted), None)

    @property
    def waiting(self) -> int:
        return sum(1 for lock in self.locks if not lock.granted)

    @property
    def held_by(self) -> str:
        """``host pid N`` of the process running it (from its history row), else the backend."""
        lock = self.holder
        if lock is None:
            return ""
        run_host, run_pid = getattr(lock, "run_host", None), getattr(lock, "run_pid", None)
        if run_host:
            return f"{run_host} pid {run_pid}"
        return f"{lock.client_addr or 'local'} backend pid {lock.pid}"

    @cached_property
    def expected_tick(self) -> datetime | None:
        """The latest tick that should have a successful run by now (computed once: a
        status is a snapshot at ``now``, and the health report asks several times)."""
        schedule = self.schedule
        if schedule is None:
            return None
        tolerance = app_settings.MAX_SKEW + app_settings.OVERDUE_GRACE
        before = self.now - timedelta(seconds=tolerance)
        # A tick its calendar skips expects no run: the latest one it keeps does.
        return calendars.kept_tick(self.job, schedule, before, ahead=False, using=self.job.using)

    @property
    def overdue(self) -> bool:
        expected = self.expected_tick
        if expected is None or self.holder is not None or self.paused or self.done:
            return False
        if self.last_success is None:
            # Never succeeded: overdue only once it has tried and the tick has passed since.
            return self.last_run is not None and self.last_run.started < expected
        return self.last_success < expected - timedelta(seconds=app_settings.MAX_SKEW)

    @property
    def started_after_tick(self) -> float | None:
        """Seconds its last run that had a tick started after it (``None``: not read)."""
        if self.last_ticked is None:
            return None
        tick, started = self.last_ticked
        return (started - tick).total_seconds()

    @cached_property
    def waiting_tick(self) -> datetime | None:
        """Its first tick after its last run that had one, when that tick is more than its
        lateness target ago; else ``None``. Ticks up to its schedule's last change, the end of
        its last pause or its last reset were decided, not missed (as the catch-up counts
        them), and there is none before its start or after its end."""
        job, schedule, state = self.job, self.schedule, self.state
        if job.late_after is None or schedule is None or self.last_ticked is None:
            return None
        since = [self.last_ticked[0], job.edited]
        if state is not None:
            since += [state.paused_until if state.paused_at else None, state.schedule_reset]
        if job.starts is not None:
            since.append(job.starts - timedelta(microseconds=1))
        tick = schedule.next_tick(max(moment for moment in since if moment is not None))
        if job.ends is not None and tick > job.ends:
            return None
        return tick if tick < self.now - timedelta(seconds=job.late_after) else None

    @property
    def late(self) -> bool:
        """Past its lateness target and not yet overdue (the module's docstring says when)."""
        target = self.job.late_after
        lateness = self.started_after_tick
        if target is None or lateness is None or not self.job.enabled or self.paused:
            return False
        if self.done:
            return False
        return (lateness > target or self.waiting_tick is not None) and not self.overdue

    @property
    def lateness_note(self) -> str:
        """Why the job is late, and its target, in words; else ``""``."""
        if not self.late:
            return ""
        waiting, target = self.waiting_tick, human_duration(self.job.late_after)
        if waiting is not None:
            when = waiting.isoformat(timespec="seconds")
            return f"tick {when} has no run yet (late after {target})"
        started = human_duration(self.started_after_tick)
        return f"its last run started {started} after its tick (late after {target})"

    @property
    def failing(self) -> bool:
        return self.last_run is not None and self.last_run.status in FAILING

    @property
    def stuck(self) -> bool:
        lock = self.holder
        return lock is not None and bool(getattr(lock, "stale", False))

    @property
    def never_ran(self) -> bool:
        return self.last_run is None

    @property
    def problems(self) -> list[str]:
        return [name for name in PROBLEMS if getattr(self, name)]

    @property
    def summary(self) -> str:
        """One line for ``cronstatus``: ``name: PROBLEMS (last run ...; held by ...)``."""
        details = []
        if self.last_run is not None:
            started = self.last_run.started.isoformat(timespec="seconds")
            details.append(f"last run {self.last_run.status} at {started}")
        if self.holder is not None:
            details.append(f"held by {self.held_by}")
        if self.paused:
            details.append(self.paused)
        if self.late:
            details.append(self.lateness_note)
        if self.done:
            details.append(self.done)
        problems = ", ".join(self.problems).upper() or ("never ran" if self.never_ran else "ok")
        return f"{self.name}: {problems}" + (f" ({'; '.join(details)})" if details else "")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready facts, for ``cronstatus --json``."""
        last = self.last_run
        lock = self.holder

        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "job": self.name,
            "tenant": self.job.tenant,
            "key": str(self.job.key),
            "schedule": self.job.schedule_text,
            "schedule_description": self.schedule_description,
            "timezone": self.zone,
            "scope": self.job.scope,
            "at_most_once": self.job.at_most_once,
            "max_runtime": self.job.max_runtime,
            "last_run": None
            if last is None
            else {
                "id": last.pk,
                "status": last.status,
                "tick": iso(last.tick),
                "started": iso(last.started),
                "finished": iso(last.finished),
                "host": last.host,
                "pid": last.pid,
            },
            "last_success": iso(self.last_success),
            "next_tick": iso(self.next_tick),
            "held": lock is not None,
            "held_by": self.held_by or None,
            "held_seconds": None
            if lock is None or getattr(lock, "held_for", None) is None
            else lock.held_for.total_seconds(),  # type: ignore[attr-defined]
            "waiting": self.waiting,
            "paused": self.paused or None,
            "run_requested": iso(self.run_requested),
            "never_ran": self.never_ran,
            "late_after": self.job.late_after,
            "started_after_tick": self.started_after_tick,
            "overdue": self.overdue,
            "late": self.late,
            "stuck": self.stuck,
            "failing": self.failing,
            "problems": self.problems,
            "done": self.done or None,
        }


def job_statuses(
    names: list[str] | None = None,
    now: datetime | None = None,
    window: float | None = None,
    using: str | None = None,
) -> list[JobStatus]:
    """The status of every job (or of ``names``), in name order: those defined in code and the
    database's schedules ([catalog][django_advisory_cron.jobs.catalog]), read from the lock
    database (or ``using``).

    With ``window`` (seconds), each status also counts the job's runs per status started in
    the last ``window`` seconds (``run_counts``), in the same history query.
    """
    return _read(names, now, window, using, with_workers=False)[0]


def statuses_and_workers(
    names: list[str] | None = None, using: str | None = None
) -> tuple[list[JobStatus], list[LiveWorker]]:
    """``job_statuses(names)`` and the live workers, the workers read by the history
    statement: one statement fewer for the pages and commands that show both."""
    statuses, workers = _read(names, None, None, using, with_workers=True)
    return statuses, workers if workers is not None else live_workers(lock_database(using))


def _read(
    names: list[str] | None,
    now: datetime | None,
    window: float | None,
    using: str | None,
    *,
    with_workers: bool,
) -> tuple[list[JobStatus], list[LiveWorker] | None]:
    """The statuses, and the live workers when asked for and there is a job to read them
    with (``None`` otherwise)."""
    alias = lock_database(using)
    found = catalog.current(alias)
    # A per-tenant job is one status per tenant (name@schema): its runs are recorded so.
    jobs = [
        each
        for job in found.all()
        for each in fanout.split(job)
        if names is None or job.name in names or each.name in names
    ]
    now = now or timezone.now()
    statuses = {job.name: JobStatus(job, now) for job in jobs}
    if not statuses:
        return [], None
    since = None if window is None else now - timedelta(seconds=window)
    statement = reads.job_summaries(
        list(statuses),
        skips=list(SKIPS),
        since=since,
        late_bounds=list(LATENESS_BUCKETS),
        targets=[job.name for job in jobs if job.late_after is not None],
        prefix=PRESENCE_NAME if with_workers else None,
    )
    runs, states = len(reads.RUN_COLUMNS), len(reads.STATE_COLUMNS)
    workers = None
    for row in fetch_all(alias, statement):
        name, run, rest = row[0], row[1 : 1 + runs], row[1 + runs :]
        last_success, counts, buckets, seconds, tick, started = rest[:6]
        state, (worker_names, began, addresses) = rest[6 : 6 + states], rest[6 + states :]
        item = statuses[name]
        if run[0] is not None:
            item.last_run = JobRun.from_db(alias, list(reads.RUN_COLUMNS), run)
        item.last_success = last_success
        if window is not None:
            item.run_counts = json.loads(counts) if counts else {}
            item.lateness = Lateness.read(json.loads(buckets) if buckets else {}, seconds)
        if tick is not None:
            item.last_ticked = (tick, started)
        if state[0] is not None:
            item.state = JobState.from_db(alias, list(reads.STATE_COLUMNS), state)
        if worker_names is not None:
            workers = read_workers(zip(worker_names, began, addresses, strict=True))
    for lock in held_locks(alias).filter(job__in=list(statuses)).order_by("-granted", "since"):
        statuses[lock.job].locks.append(lock)
    limited = [job.name for job in jobs if job.max_runs is not None]
    for name, runs in runs_of(alias, limited).items():
        statuses[name].runs = runs
    return list(statuses.values()), workers


def unhealthy(statuses: list[JobStatus], ignore: tuple[str, ...] = ()) -> list[JobStatus]:
    """The jobs with a problem not in ``ignore``."""
    return [status for status in statuses if set(status.problems) - set(ignore)]


def missing_workers(statuses: list[JobStatus], workers: list[LiveWorker], expected: int) -> str:
    """What is wrong with the live workers, in one line; empty when nothing is (no scheduled
    job, or at least ``expected`` workers alive). Some alive is degraded, not an outage: an
    operator woken by it should read which."""
    scheduled = any(item.job.schedule_text is not None for item in statuses)
    if not scheduled or len(workers) >= expected:
        return ""
    if workers:
        return (
            f"cronworker: {len(workers)} of the {expected} expected alive: degraded; the "
            "scheduled jobs still run, with less to spare if another stops: start "
            "'manage.py cronworker' in the replicas that lack one"
        )
    return (
        f"cronworker: expected at least {expected} live worker(s), none is running; nothing "
        "runs the scheduled jobs: start 'manage.py cronworker' in each replica"
    )


def health_report(
    statuses: list[JobStatus],
    ignore: tuple[str, ...] = (),
    workers: list[LiveWorker] | None = None,
    expected_workers: int = 0,
) -> dict[str, Any]:
    """The JSON document of ``cronstatus --json``."""
    bad = unhealthy(statuses, ignore)
    live = workers or []
    problem = missing_workers(statuses, live, expected_workers)
    return {
        "healthy": not bad and not problem,
        "unhealthy": [item.name for item in bad],
        "ignored": list(ignore),
        "workers": {
            "expected": expected_workers,
            "live": [worker.as_dict() for worker in live],
            "problem": problem or None,
        },
        "jobs": [item.as_dict() for item in statuses],
    }


def health_document(ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """The health of every job and of the workers (``EXPECT_WORKERS``), as
    ``cronstatus --json`` prints it: three queries."""
    statuses, workers = statuses_and_workers()
    return health_report(statuses, ignore, workers, app_settings.EXPECT_WORKERS)
