"""The timeline's facts: for each job, its runs within a window of time and its ticks to come,
on the database's clock.

The runs and the pauses of every job shown, and the window itself, come from one statement
(``sql.timeline_runs``): a short index walk per job, so the cost follows what the window
holds, never the length of the history. The ticks to come are computed here, as ``cronjob
next`` computes them ([upcoming][django_advisory_cron.ops.upcoming]): pauses, a schedule's
start and end, jitter offsets and changes of the UTC offset marked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from ..conf import app_settings
from ..core.jitter import offset
from ..core.statuses import FAILING, SKIPS
from ..db import sql
from ..exceptions import InvalidSchedule
from ..jobs.job import Job
from ..models import JobState, RunStatus
from . import upcoming

#: The spans the timeline zooms between, by the name its links use.
SPANS = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "1d": timedelta(days=1),
    "3d": timedelta(days=3),
    "7d": timedelta(days=7),
}
DEFAULT_SPAN = "1d"
#: The share of a window after now, when it is not moved: the next ticks stay in sight.
AHEAD = 0.25
#: The most runs, and the most ticks, a job's row draws in one window (more: zoom in).
PER_ROW = 300


@dataclass(frozen=True)
class Window:
    """The time a timeline shows, and the database's now."""

    starts: datetime
    ends: datetime
    now: datetime

    @property
    def span(self) -> timedelta:
        return self.ends - self.starts

    def place(self, at: datetime) -> float:
        """Where ``at`` falls across the window, in percent (clamped to its edges)."""
        share = (at - self.starts) / self.span
        return min(max(share * 100, 0.0), 100.0)


@dataclass(frozen=True)
class Run:
    """One run row, as a bar or a mark shows it."""

    id: int
    tick: datetime | None
    started: datetime
    finished: datetime | None
    status: str
    manual: bool
    attempts: int
    host: str
    #: Started after the tick that followed its own: a missed tick run late, after a gap.
    caught_up: bool = False

    @property
    def skipped(self) -> bool:
        return self.status in SKIPS

    @property
    def failing(self) -> bool:
        return self.status in FAILING


@dataclass(frozen=True)
class Tick:
    """A tick to come: ``start`` is when its run starts (the tick plus its jitter offset)."""

    upcoming: upcoming.Upcoming
    start: datetime
    #: "" or why it will not run: a pause, the schedule's start or end.
    skipped: str


@dataclass
class Lane:
    """A job's row: its pause, its runs in the window (newest first), its ticks to come."""

    job: Job[..., Any]
    paused: bool = False
    paused_until: datetime | None = None
    runs: list[Run] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    #: More runs in the window than a row draws.
    more_runs: bool = False
    #: "" or why the job has no ticks to show: no schedule, disabled, a schedule that fails.
    no_ticks: str = ""

    def has(self, status: str) -> bool:
        """Whether the row matches the status filter ``status``."""
        if status == "paused":
            return self.paused
        if status == "failed":
            return any(run.failing for run in self.runs)
        if status == "skipped":
            return any(run.skipped for run in self.runs)
        if status == "running":
            return any(run.status == RunStatus.RUNNING for run in self.runs)
        return True


#: The status filter's choices: what a row must show.
STATUS_FILTERS = {
    "failed": "failed, timed out or lost its lock",
    "running": "running",
    "skipped": "skipped",
    "paused": "paused",
}


def read(
    jobs: list[Job[..., Any]], span: timedelta, ends: datetime | None = None
) -> tuple[Window, list[Lane]]:
    """The window (``span`` long, ending at ``ends``, else a quarter of it after now) and a
    lane per job of ``jobs``, in their order, with its runs (no ticks yet: ``add_ticks``)."""
    text, params = sql.timeline_runs(
        [job.name for job in jobs],
        span=span,
        ahead=span * AHEAD,
        ends=ends,
        skips=list(SKIPS),
        limit=PER_ROW + 1,
    )
    with connections[app_settings.lock_database].cursor() as cursor:
        cursor.execute(text, params)
        rows = cursor.fetchall()
    now, starts, window_ends = rows[0][:3]
    window = Window(starts, window_ends, now)
    lanes = {job.name: Lane(job) for job in jobs}
    for row in rows:
        lane = lanes.get(row[3])
        if lane is None:
            continue
        lane.paused, lane.paused_until = row[4], row[5]
        if row[6] is not None:
            lane.runs.append(_caught_up(Run(*row[6:]), lane.job))
    for lane in lanes.values():
        lane.more_runs = len(lane.runs) > PER_ROW
        del lane.runs[PER_ROW:]
    return window, list(lanes.values())


def _caught_up(run: Run, job: Job[..., Any]) -> Run:
    """``run``, marked when it started at or after the tick after its own: only a run that
    came later than its schedule's shortest interval is looked at closer."""
    if run.tick is None or run.skipped or job.schedule is None:
        return run
    try:
        if run.started - run.tick < job.schedule.min_interval:
            return run
        following = job.schedule.next_tick(run.tick)
    except InvalidSchedule:
        return run
    if run.started < following:
        return run
    return Run(**{**run.__dict__, "caught_up": True})


def add_ticks(window: Window, lanes: list[Lane]) -> None:
    """Each lane's ticks between now (or the window's start, if later) and the window's end."""
    after = max(window.now, window.starts)
    for lane in lanes:
        job = lane.job
        if not job.enabled:
            lane.no_ticks = "disabled: no ticks"
            continue
        try:
            schedule = job.schedule
        except InvalidSchedule as error:
            lane.no_ticks = str(error)
            continue
        if schedule is None:
            lane.no_ticks = "no schedule: runs when called"
            continue
        if after >= window.ends:
            continue
        state = JobState(job=job.name, paused=lane.paused, paused_until=lane.paused_until)
        for tick in upcoming.next_ticks(schedule, after, PER_ROW, state, until=window.ends):
            shift = offset(job.name, tick.tick, job.jitter)
            outside = "" if job.in_window(tick.tick) else "outside the schedule's start and end"
            lane.ticks.append(Tick(tick, tick.tick + shift, tick.skipped or outside))
