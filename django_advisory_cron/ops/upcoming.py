"""A job's next ticks before they come, as ``cronjob next`` and the admin show them: each in
the zone the schedule is read in (a cron's own zone, else ``TIME_ZONE``; an interval's ticks,
which no zone moves, in ``TIME_ZONE``), with a change of that zone's UTC offset (daylight
saving time begins or ends), a pause that will skip it and a day its business calendar skips
(naming the holiday) marked, so that an operator sees what will run before it does."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from django.conf import settings

from ..core.schedule import Every, Schedule

if TYPE_CHECKING:
    from ..models import JobState

#: The most ticks one preview lists.
MOST = 1000

#: Why a job's business calendar skips each of some ticks (``None``: it runs).
OffCalendar = Callable[[list[datetime]], dict[datetime, "str | None"]]


@dataclass(frozen=True)
class Upcoming:
    """One tick to come."""

    #: The tick (UTC), as its run row will name it.
    tick: datetime
    #: The same instant in the schedule's zone.
    local: datetime
    #: "" or what changed since the tick before it: "UTC+01:00 -> UTC+02:00".
    offset_change: str
    #: "" or why it will not run: "paused until 2026-12-24 18:00:00 UTC", "paused",
    #: "Christmas Day (holidays:DE-BY)" (its calendar skips its day).
    skipped: str

    @property
    def when(self) -> str:
        """Its time in the schedule's zone, to the second."""
        return f"{self.local:%Y-%m-%d %H:%M:%S}"

    @property
    def offset(self) -> str:
        """Its UTC offset in the schedule's zone: "UTC+01:00"."""
        return offset_text(self.local.utcoffset())

    @property
    def note(self) -> str:
        """What is marked on it: a change of offset, a pause that skips it ("" if nothing)."""
        notes = []
        if self.offset_change:
            notes.append(f"clocks change: {self.offset_change}")
        if self.skipped:
            notes.append(f"skipped: {self.skipped}")
        return "; ".join(notes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tick": self.tick.isoformat(),
            "local": self.local.isoformat(),
            "offset_change": self.offset_change or None,
            "skipped": self.skipped or None,
        }


def zone_of(schedule: Schedule) -> str:
    """The zone a schedule's ticks are shown in."""
    if isinstance(schedule, Every):
        return settings.TIME_ZONE or "UTC"
    return schedule.zone_name


def next_ticks(
    schedule: Schedule,
    now: datetime,
    count: int,
    state: JobState | None = None,
    until: datetime | None = None,
    calendar: OffCalendar | None = None,
) -> list[Upcoming]:
    """The ``count`` ticks after ``now`` (at most [MOST][django_advisory_cron.ops.upcoming.MOST]),
    and not after ``until`` when given, each marked as the module says; ``state`` is the job's,
    with its pause; ``calendar`` says which ticks the job's business calendar skips."""
    zone = zoneinfo.ZoneInfo(zone_of(schedule))
    ticks: list[Upcoming] = []
    at = now
    previous = now.astimezone(zone).utcoffset()
    for _ in range(min(count, MOST)):
        tick = schedule.next_tick(at)
        if (until is not None and tick > until) or (
            schedule.last is not None and tick > schedule.last
        ):
            break
        local = tick.astimezone(zone)
        offset = local.utcoffset()
        change = "" if offset == previous else f"{offset_text(previous)} -> {offset_text(offset)}"
        ticks.append(Upcoming(tick, local, change, paused_skip(state, tick)))
        at, previous = tick, offset
    if calendar is not None and ticks:
        off = calendar([each.tick for each in ticks])
        ticks = [
            replace(each, skipped=off[each.tick] or "") if off.get(each.tick) else each
            for each in ticks
        ]
    return ticks


def offset_text(offset: timedelta | None) -> str:
    minutes = int((offset or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, minutes = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{minutes:02d}"


def paused_skip(state: JobState | None, tick: datetime) -> str:
    """Why a pause skips ``tick`` ("" if it does not): the claim skips a tick while the
    pause has not ended."""
    if state is None or not state.paused:
        return ""
    if state.paused_until is None:
        return "paused"
    if tick >= state.paused_until:
        return ""
    return f"paused until {state.paused_until.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
