"""The timeline's facts: for each job, its runs within a window of time and its ticks to come,
on the database's clock.

The runs and the pauses of every job shown, and the window itself, come from one statement
(``reads.timeline_runs``): a short index walk per job, so the cost follows what the window
holds, never the length of the history. The ticks to come are computed here, as ``cronjob
next`` computes them ([upcoming][django_advisory_cron.ops.upcoming]): pauses, a schedule's
start and end, jitter offsets and changes of the UTC offset marked.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from ..conf import app_settings
from ..core.jitter import offset
from ..core.statuses import FAILING, SKIPS
from ..db import reads
from ..db.execute import fetch_all
from ..exceptions import InvalidSchedule
from ..jobs import calendars
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


def moment(seconds: float) -> datetime:
    """A time read as seconds since the epoch."""
    return datetime.fromtimestamp(seconds, timezone.utc)


@dataclass(frozen=True)
class Window:
    """The time a timeline shows, and the database's now, in seconds since the epoch."""

    start: float
    end: float
    at: float

    @property
    def starts(self) -> datetime:
        return moment(self.start)

    @property
    def ends(self) -> datetime:
        return moment(self.end)

    @property
    def now(self) -> datetime:
        return moment(self.at)

    @property
    def span(self) -> timedelta:
        return timedelta(seconds=self.end - self.start)

    @property
    def shows_now(self) -> bool:
        return self.start <= self.at <= self.end

    def place(self, at: float) -> float:
        """Where ``at`` (seconds since the epoch) falls across the window, in percent
        (clamped to its edges)."""
        share = (at - self.start) / (self.end - self.start)
        return min(max(share * 100, 0.0), 100.0)


@dataclass(frozen=True)
class Run:
    """One run row, as a bar or a mark shows it; its times in seconds since the epoch."""

    id: int
    tick: float | None
    started: float
    finished: float | None
    status: str
    manual: bool
    attempts: int
    host: str
    #: Started by ``cronjob backfill`` (late on purpose: never a catch-up).
    backfill: bool
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
    """A tick to come: ``start`` is when its run starts (the tick plus its jitter offset), in
    seconds since the epoch."""

    upcoming: upcoming.Upcoming
    start: float
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
    #: More runs, or more ticks, in the window than a row draws.
    crowded: bool = False
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
    statement = reads.timeline_runs(
        [job.name for job in jobs],
        span=span,
        ahead=span * AHEAD,
        ends=ends,
        skips=list(SKIPS),
        limit=PER_ROW + 1,
    )
    rows = fetch_all(app_settings.lock_database, statement)
    window = Window(rows[0][1], rows[0][2], rows[0][0])
    lanes = {job.name: Lane(job) for job in jobs}
    shortest = {}
    for job in jobs:
        try:
            shortest[job.name] = job.schedule.min_interval.total_seconds() if job.schedule else 0
        except InvalidSchedule:
            shortest[job.name] = 0
    for row in rows:
        lane = lanes.get(row[3])
        if lane is None:
            continue
        lane.paused, lane.paused_until = row[4], row[5]
        if row[6] is not None:
            lane.runs.append(_caught_up(Run(*row[6:]), lane.job, shortest[lane.job.name]))
    for lane in lanes.values():
        lane.runs.sort(key=lambda run: (run.started, run.id), reverse=True)
        lane.crowded = len(lane.runs) > PER_ROW
        del lane.runs[PER_ROW:]
    return window, list(lanes.values())


def _caught_up(run: Run, job: Job[..., Any], shortest: float) -> Run:
    """``run``, marked when it started at or after the tick after its own: only a run later
    than its schedule's ``shortest`` interval (seconds) is looked at closer."""
    late = run.started - (run.tick or 0)
    if run.tick is None or run.skipped or run.backfill or not shortest or late < shortest:
        return run
    assert job.schedule is not None  # it has an interval
    if run.started < job.schedule.next_tick(moment(run.tick)).timestamp():
        return run
    return replace(run, caught_up=True)


def add_ticks(window: Window, lanes: list[Lane]) -> None:
    """Each lane's ticks between now (or the window's start, if later) and the window's end.
    Jobs with the same schedule share its ticks, computed once."""
    after, until = moment(max(window.at, window.start)), window.ends
    shared: dict[tuple[Any, ...], list[upcoming.Upcoming]] = {}
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
        if window.at >= window.end:
            continue
        same = (job.cron, job.every, job.timezone, job.at)
        if same not in shared:
            shared[same] = upcoming.next_ticks(schedule, after, PER_ROW, until=until)
        state = JobState(job=job.name, paused=lane.paused, paused_until=lane.paused_until)
        lane.crowded = lane.crowded or len(shared[same]) == PER_ROW
        off = calendars.reasons(job, [tick.tick for tick in shared[same]], job.using)
        for tick in shared[same]:
            skipped = off.get(tick.tick) or upcoming.paused_skip(state, tick.tick)
            if not job.in_window(tick.tick):
                skipped = "outside the schedule's start and end"
            lane.ticks.append(
                Tick(
                    tick, (tick.tick + offset(job.name, tick.tick, job.jitter)).timestamp(), skipped
                )
            )
