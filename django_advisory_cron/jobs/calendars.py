"""A job's business calendar where its ticks run: which ticks it skips, and why.

Every replica answers alike, with no message between them: the answer is a function of the
job's ``calendar``, the tick's date in the job's zone (see
[calendars][django_advisory_cron.core.calendars]) and the dates operators added, read from the
database. A tick it skips is not claimed by anyone; with ``RECORD_SKIPS`` it is recorded once
(whichever replica writes it first), as ``skipped_calendar`` with its reason.
"""

from __future__ import annotations

import functools
import os
import zoneinfo
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

from ..conf import app_settings
from ..core import calendars
from ..core.statuses import RunStatus
from ..db.aliases import lock_database
from ..models import CalendarDate, JobRun
from ..run.history import HOST

if TYPE_CHECKING:
    from ..core.schedule import Schedule

#: The most days a tick the calendar keeps is looked for, back or ahead (a ``first`` or
#: ``last`` rule keeps one day a month; a month with none makes two).
LOOK_DAYS = 70
_MICROSECOND = timedelta(microseconds=1)


class OnCalendar(Protocol):
    """What a job's calendar needs of it (a [Job][django_advisory_cron.jobs.job.Job])."""

    @property
    def name(self) -> str: ...
    @property
    def calendar(self) -> str | None: ...
    @property
    def timezone(self) -> str | None: ...


@functools.lru_cache(maxsize=1024)
def parsed(text: str) -> calendars.Calendar:
    """``text`` parsed once (the codes were checked where it was typed)."""
    return calendars.parse(text, known=False)


def zone_of(job: OnCalendar) -> zoneinfo.ZoneInfo:
    """The zone a tick's date is read in: the job's, else ``TIME_ZONE``."""
    return zoneinfo.ZoneInfo(job.timezone or settings.TIME_ZONE or "UTC")


def operator_dates(
    calendar: calendars.Calendar, start: date, end: date, using: str | None = None
) -> dict[tuple[str, date], str]:
    """The dates operators added to ``calendar``'s sources from ``start`` to ``end``."""
    rows = CalendarDate.objects.using(lock_database(using)).filter(
        calendar__in=calendar.names, day__range=(start, end)
    )
    return {(row.calendar, row.day): row.reason for row in rows}


def skip_reason(job: OnCalendar, tick: datetime, using: str | None = None) -> str | None:
    """Why ``job``'s calendar skips ``tick`` (``"Christmas Day (holidays:DE-BY)"``), or
    ``None``: it runs (or the job has no calendar)."""
    if not job.calendar:
        return None
    calendar = parsed(job.calendar)
    day = calendars.day_of(tick, zone_of(job))
    start, end = calendars.month_span(day) if calendar.rule in ("first", "last") else (day, day)
    return calendar.skip_reason(day, operator_dates(calendar, start, end, using))


def reasons(
    job: OnCalendar, ticks: Iterable[datetime], using: str | None = None
) -> dict[datetime, str | None]:
    """``skip_reason`` of each of ``ticks``, with one read of the operator's dates."""
    ticks = list(ticks)
    if not job.calendar or not ticks:
        return dict.fromkeys(ticks)
    calendar = parsed(job.calendar)
    zone = zone_of(job)
    found = {tick: calendars.day_of(tick, zone) for tick in ticks}
    start = calendars.month_span(min(found.values()))[0]
    end = calendars.month_span(max(found.values()))[1]
    extra = operator_dates(calendar, start, end, using)
    return {tick: calendar.skip_reason(day, extra) for tick, day in found.items()}


def record_skip(
    job: OnCalendar, tick: datetime, why: str, now: datetime, using: str | None = None
) -> None:
    """With ``RECORD_SKIPS``: the tick's ``skipped_calendar`` row, once across replicas (a
    second writer's row is refused by the table's constraint, and nothing is said). A
    database error is raised (the caller logs it; the tick is skipped all the same)."""
    if not app_settings.RECORD_SKIPS:
        return
    JobRun.objects.using(lock_database(using)).bulk_create(
        [
            JobRun(
                job=job.name,
                tick=tick,
                host=HOST,
                pid=os.getpid(),
                started=now,
                finished=now,
                status=RunStatus.SKIPPED_CALENDAR,
                error=f"calendar {job.calendar}: {why}",
            )
        ],
        ignore_conflicts=True,
    )


def kept_tick(
    job: OnCalendar,
    schedule: Schedule,
    at: datetime,
    *,
    ahead: bool,
    using: str | None = None,
) -> datetime | None:
    """The tick of ``schedule`` nearest ``at`` that ``job``'s calendar keeps: the first after
    it (``ahead``) or the latest at or before it; a skipped day is stepped over whole (an
    every-second job skips 86,400 ticks a day). ``None``: none within ``LOOK_DAYS`` days, or
    the schedule has no such tick."""
    if not job.calendar:  # as the schedule says, its failures included
        return schedule.next_tick(at) if ahead else schedule.previous_tick(at)
    try:
        tick = schedule.next_tick(at) if ahead else schedule.previous_tick(at)
    except Exception:
        return None
    calendar = parsed(job.calendar)
    zone = zone_of(job)
    first = calendars.day_of(at, zone)
    last = first + timedelta(days=LOOK_DAYS if ahead else -LOOK_DAYS)
    start, end = sorted((first, last))
    extra = operator_dates(
        calendar, calendars.month_span(start)[0], calendars.month_span(end)[1], using
    )
    for _ in range(LOOK_DAYS + 1):
        day = calendars.day_of(tick, zone)
        if not start <= day <= end:
            return None
        if calendar.skip_reason(day, extra) is None:
            return tick
        try:
            if ahead:
                following = datetime.combine(day + timedelta(days=1), time(), zone)
                tick = schedule.next_tick(following - _MICROSECOND)
            else:
                tick = schedule.previous_tick(datetime.combine(day, time(), zone) - _MICROSECOND)
        except Exception:
            return None
    return None
