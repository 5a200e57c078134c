"""The timeline drawn: a job's row as an inline SVG, and the time axis above the rows.

Places are percents of the row's width, so a row fills its column at any window width and
keeps its height, with no script. Every bar and mark has a ``<title>`` (the browser's hover
text, what a screen reader reads) and a shape or letter besides its colour: a failure is a
bar with ``!`` above it, a manual run ``M``, a retried one ``R``, a catch-up ``C``, a
backfill ``B``; a skip a hollow circle; a tick to come a dashed line (dotted when it will be
skipped), ``±`` where the clocks change. A run's bar links to its page. Built with plain
string formatting, the text of the runs escaped: a page may draw thousands of bars.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, tzinfo
from html import escape

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from ..models import RunStatus
from ..ops.charts import colour, human_duration
from ..ops.timeline import Lane, Run, Tick, Window

HEIGHT = 30
#: The narrowest bar, in percent of the row: a one-second run stays visible in a week.
MIN_WIDTH = 0.12

#: The axis's steps for each span: its grid lines and labels.
STEPS = (
    (timedelta(hours=1), timedelta(minutes=10)),
    (timedelta(hours=6), timedelta(hours=1)),
    (timedelta(days=1), timedelta(hours=3)),
    (timedelta(days=3), timedelta(hours=12)),
)
LONGEST_STEP = timedelta(days=1)

_LABELS = {status.value: str(status.label) for status in RunStatus}


def _at(seconds: float, zone: tzinfo) -> str:
    """A time given in seconds since the epoch, on the local clock, to the second."""
    return datetime.fromtimestamp(seconds, zone).isoformat(" ", "seconds")[:19]


def step_of(span: timedelta) -> timedelta:
    """The axis's step for a window of ``span``."""
    return next((step for longest, step in STEPS if span <= longest), LONGEST_STEP)


def grid(window: Window, zone: tzinfo) -> list[tuple[float, datetime]]:
    """The axis's marks: each step's start (on the local clock) within the window, placed."""
    step = step_of(window.span)
    local = window.starts.astimezone(zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    seconds = step.total_seconds()
    elapsed = (local - midnight).total_seconds()
    at = (midnight + timedelta(seconds=(elapsed // seconds + 1) * seconds)).astimezone(zone)
    marks = []
    while at < window.ends:
        marks.append((window.place(at.timestamp()), at))
        at = (at + step).astimezone(zone)
    return marks


def axis(window: Window) -> SafeString:
    """The labelled time axis, with "now" marked when it is within the window: a mark at
    midnight names its day ("Sun"), the first of the window its day and time; a label too
    close to the right edge to fit is left out (its line stays), each has its full date as its
    title."""
    zone = timezone.get_current_timezone()
    parts = []
    day = None
    for place, at in grid(window, zone):
        label = at.strftime("%H:%M")
        if at.date() != day:
            if at.hour == at.minute == 0:
                label = at.strftime("%a")
            elif day is None:
                label = at.strftime("%a %H:%M")
            day = at.date()
        parts.append(
            f'<line class="grid" x1="{place:.3f}%" x2="{place:.3f}%" y1="22" y2="{HEIGHT}"/>'
        )
        if place < 92:
            parts.append(
                f'<text x="{place:.3f}%" y="18" class="axis-label">{escape(label)}'
                f"<title>{at:%Y-%m-%d %H:%M %Z}</title></text>"
            )
    if window.shows_now:
        place = window.place(window.at)
        parts.append(
            f'<line class="now" x1="{place:.3f}%" x2="{place:.3f}%" y1="0" y2="{HEIGHT}">'
            f"<title>now: {_at(window.at, zone)}</title></line>"
        )
    title = f"from {_at(window.start, zone)} to {_at(window.end, zone)}"
    return mark_safe(  # numbers and escaped text only
        f'<svg class="timeline-axis" xmlns="http://www.w3.org/2000/svg" width="100%" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(title)}"><title>{escape(title)}'
        f"</title>{''.join(parts)}</svg>"
    )


def _run_text(job: str, run: Run, now: float, zone: tzinfo) -> str:
    parts = [f"{job}: {_LABELS.get(run.status, run.status)}", f"started {_at(run.started, zone)}"]
    if run.finished is not None:
        parts.append(
            f"finished {_at(run.finished, zone)} ({human_duration(run.finished - run.started)})"
        )
    elif run.status == RunStatus.RUNNING:
        parts.append(f"running for {human_duration(now - run.started)}")
    parts.append(f"tick {_at(run.tick, zone)}" if run.tick else "outside the schedule")
    if run.caught_up:
        parts.append("caught up after its next tick had passed")
    if run.manual:
        parts.append("run by hand")
    if run.backfill:
        parts.append("a backfill")
    if run.attempts > 1:
        parts.append(f"{run.attempts} attempts")
    parts.append(f"host {run.host}")
    return "; ".join(parts)


def _flags(run: Run) -> str:
    return (
        ("!" if run.failing else "")
        + ("M" if run.manual else "")
        + ("R" if run.attempts > 1 else "")
        + ("C" if run.caught_up else "")
        + ("B" if run.backfill else "")
    )


def _run(lane: Lane, run: Run, window: Window, zone: tzinfo, runs_url: str) -> str:
    name = lane.job.name
    title = escape(_run_text(name, run, window.at, zone))
    x = window.place(run.started)
    if run.skipped:
        return (
            f'<circle class="skip s-{run.status}" cx="{x:.3f}%" cy="20" r="3.5">'
            f"<title>{title}</title></circle>"
        )
    end = run.finished or window.at
    width = max(window.place(end) - x, MIN_WIDTH)
    flags = _flags(run)
    flag = f'<text class="flag" x="{x:.3f}%" y="9">{flags}</text>' if flags else ""
    bar = (
        f'{flag}<rect class="run s-{run.status}" x="{x:.3f}%" y="11" width="{width:.3f}%" '
        f'height="16" fill="{colour(run.status)}"><title>{title}</title></rect>'
    )
    return f'<a href="{runs_url}{run.id}/change/">{bar}</a>' if runs_url else bar


def _tick(lane: Lane, tick: Tick, window: Window) -> str:
    zone_name = str(tick.upcoming.local.tzinfo)
    x = window.place(tick.start)
    at = window.place(tick.upcoming.tick.timestamp())
    text = f"{lane.job.name}: next tick {tick.upcoming.when} {tick.upcoming.offset} ({zone_name})"
    shift = tick.start - tick.upcoming.tick.timestamp()
    parts = []
    if shift > 0:
        text += f", starts {human_duration(shift)} after it (jitter)"
        parts.append(
            f'<rect class="jitter" x="{at:.3f}%" y="25" width="{x - at:.3f}%" height="2"/>'
        )
    if tick.upcoming.offset_change:
        text += f"; clocks change: {tick.upcoming.offset_change}"
        parts.append(f'<text class="flag dst" x="{x:.3f}%" y="9">±</text>')
    if tick.skipped:
        text += f"; skipped: {tick.skipped}"
    kind = "tick skipped" if tick.skipped else "tick"
    parts.append(
        f'<line class="{kind}" x1="{x:.3f}%" x2="{x:.3f}%" y1="11" y2="{HEIGHT - 3}">'
        f"<title>{escape(text)}</title></line>"
    )
    return "".join(parts)


def lane(row: Lane, window: Window, gridlines: Iterable[float], runs_url: str) -> SafeString:
    """A job's row: grid lines, its runs (oldest drawn first; each a link to its page under
    ``runs_url``, the run history's address, unless that is empty), its ticks, and now."""
    zone = timezone.get_current_timezone()
    parts = [
        f'<line class="grid" x1="{p:.3f}%" x2="{p:.3f}%" y1="0" y2="{HEIGHT}"/>' for p in gridlines
    ]
    parts.extend(_run(row, run, window, zone, runs_url) for run in reversed(row.runs))
    parts.extend(_tick(row, tick, window) for tick in row.ticks)
    if window.shows_now:
        place = window.place(window.at)
        parts.append(
            f'<line class="now" x1="{place:.3f}%" x2="{place:.3f}%" y1="0" y2="{HEIGHT}"/>'
        )
    name = escape(row.job.name)
    summary = f"{name}: {len(row.runs)} runs and skips, {len(row.ticks)} ticks to come"
    return mark_safe(  # numbers and escaped text only
        f'<svg class="timeline-lane" xmlns="http://www.w3.org/2000/svg" width="100%" '
        f'height="{HEIGHT}" role="group" aria-label="{summary}" data-job="{name}">'
        f"{''.join(parts)}</svg>"
    )
