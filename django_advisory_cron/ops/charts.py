"""Run charts for the admin: each job's last runs as a small inline SVG strip.

One bar per run, oldest on the left: its height is the run's duration (relative to the
longest run in the strip), its colour the run's status, and its ``<title>`` (the browser's
hover text) the tick, host, status and duration. Rendered on the server as plain SVG, so the
page needs no JavaScript and no chart library. The strip does not keep its aspect ratio: where
the admin's stylesheet narrows it to fit its column, the bars narrow and keep their height. The
runs of every job on a page come from one statement (a short index walk per job), however long
the history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta, tzinfo
from html import escape
from typing import NamedTuple

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from ..conf import app_settings
from ..core.statuses import SKIPS
from ..db import reads
from ..db.execute import fetch_all
from ..models import RunStatus

#: How many runs a strip shows.
RUNS_SHOWN = 50
BAR_WIDTH, GAP, HEIGHT, MIN_BAR = 5, 1, 24, 2

RED, GREEN, GREY, AMBER, BLUE = "#ba2121", "#417505", "#666", "#b26b00", "#205067"
#: The colour of each status, shared with the admin's status badges.
STATUS_COLOURS = {
    RunStatus.SUCCEEDED: GREEN,
    RunStatus.FAILED: RED,
    RunStatus.LOCK_LOST: RED,
    RunStatus.TIMED_OUT: RED,
    RunStatus.INTERRUPTED: AMBER,
    RunStatus.RUNNING: BLUE,
    RunStatus.SKIPPED_PAUSED: AMBER,
}
#: Skips are not runs: a strip shows what ran.


def colour(status: str) -> str:
    return STATUS_COLOURS.get(RunStatus(status), GREY)


class ChartRun(NamedTuple):
    """What a bar shows of a run."""

    job: str
    #: Seconds since the epoch; ``None``: a run outside the schedule.
    tick: float | None
    host: str
    pid: int
    status: str
    seconds: float


def recent_runs(names: list[str], limit: int = RUNS_SHOWN) -> dict[str, list[ChartRun]]:
    """The last ``limit`` runs (skips left out) of each job in ``names``, oldest first."""
    runs: defaultdict[str, list[ChartRun]] = defaultdict(list)
    if not names:
        return runs
    statement = reads.recent_runs(names, skips=list(SKIPS), limit=limit)
    for row in fetch_all(app_settings.lock_database, statement):
        runs[row[0]].append(ChartRun(*row))
    for job_runs in runs.values():
        job_runs.reverse()
    return runs


def _tick(value: float | None, zone: tzinfo) -> str:
    """``tick 2026-03-01 02:00:00 CET``: ``isoformat``, three times cheaper than ``strftime``
    (a page titles 2,500 bars)."""
    if value is None:
        return "outside the schedule"
    local = datetime.fromtimestamp(value, zone)
    return f"tick {local.isoformat(' ', 'seconds')[:19]} {local.tzname() or ''}"


def human_lateness(seconds: float) -> str:
    """How long after its tick a run started: ``40 ms``, ``2.5 s``, ``3 min 10 s``; ``-12 ms``
    before it (a clock ahead of the database's)."""
    if abs(seconds) < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 0:
        return f"-{human_duration(-seconds)}"
    return human_duration(seconds)


def human_duration(value: timedelta | float | None) -> str:
    """``3 h 02 min``, ``4 min 05 s``, ``12.3 s``."""
    if value is None:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 60:
        return f"{max(seconds, 0):.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"


class _Legend(NamedTuple):
    """What every strip of a page shares, looked up once: the time zone, and each status's
    label and colour, its value escaped."""

    zone: tzinfo
    statuses: dict[str, tuple[str, str, str]]


def _legend() -> _Legend:
    statuses = {
        status.value: (str(status.label), colour(status.value), escape(status.value))
        for status in RunStatus
    }
    return _Legend(timezone.get_current_timezone(), statuses)


def run_strip(job: str, runs: Iterable[ChartRun], legend: _Legend | None = None) -> SafeString:
    """An inline ``<svg>`` with one bar per run (oldest first); empty when there is none.

    Built with plain string formatting, the runs' own text escaped (the standard library's
    ``escape``, which Django's wraps), the time zone and the statuses' labels looked up once
    (``legend``, shared by the strips of a page): a page draws 50 bars for each of its jobs."""
    runs = list(runs)
    if not runs:
        return SafeString("")
    zone, statuses = legend or _legend()
    longest = max(run.seconds for run in runs) or 1.0
    bars = []
    for index, run in enumerate(runs):
        height = max(MIN_BAR, round(HEIGHT * run.seconds / longest))
        label, fill, value = statuses.get(run.status) or (run.status, GREY, escape(run.status))
        text = f"{_tick(run.tick, zone)}; {run.host} pid {run.pid}; {label}; "
        bars.append(
            f'<rect x="{index * (BAR_WIDTH + GAP)}" y="{HEIGHT - height}" width="{BAR_WIDTH}" '
            f'height="{height}" fill="{fill}" data-status="{value}"><title>'
            f"{escape(text + human_duration(run.seconds))}</title></rect>"
        )
    width = len(runs) * (BAR_WIDTH + GAP) - GAP
    name = escape(job)
    return mark_safe(  # every value in it is a number or escaped above
        f'<svg class="run-chart" xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
        f'height="{HEIGHT}" viewBox="0 0 {width} {HEIGHT}" preserveAspectRatio="none" '
        f'data-job="{name}"><title>last {len(runs)} runs of {name}</title>{"".join(bars)}</svg>'
    )


def job_charts(names: list[str]) -> dict[str, SafeString]:
    """A strip per job in ``names`` (an empty string for a job that never ran)."""
    runs, legend = recent_runs(names), _legend()
    return {name: run_strip(name, runs.get(name, []), legend) for name in names}
