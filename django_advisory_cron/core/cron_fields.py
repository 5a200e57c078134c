"""The matching wall-clock times of a cron expression, from its fields as croniter expands them.

croniter parses an expression again for every starting point and steps through it with dates
it builds and checks, about a tenth of a millisecond per time; a schedule asks for a time on
every tick, preview and backfill. Plain fields (numbers, lists, ranges, steps, names) are
read here once into sorted values and searched directly. Fields with croniter's extensions
(``L``, ``#``, ``W``) have no such reading: ``fields`` returns ``None`` for them, and croniter
answers as before.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from croniter import croniter

_DAY = timedelta(days=1)
#: How far the search goes, as croniter's: an expression with no time in it is refused.
YEARS = 50


def _values(expanded: Sequence[object], size: int, first: int = 0) -> tuple[int, ...] | None:
    """A field's matching values, ascending; ``None`` if it holds anything but numbers."""
    if list(expanded) == ["*"]:
        return tuple(range(first, first + size))
    numbers = {value for value in expanded if isinstance(value, int)}
    return tuple(sorted(numbers)) if len(numbers) == len(set(expanded)) else None


class CronFields:
    """One expression's fields, read once: each its sorted values, and how the days match."""

    def __init__(
        self,
        seconds: tuple[int, ...],
        minutes: tuple[int, ...],
        hours: tuple[int, ...],
        days: tuple[int, ...],
        months: tuple[int, ...],
        weekdays: frozenset[int],
        *,
        has_seconds: bool,
        every_day: bool,
        every_weekday: bool,
        day_or: bool,
    ) -> None:
        self.seconds, self.minutes, self.hours = seconds, minutes, hours
        self.days, self.day_set, self.months = days, frozenset(days), months
        self.weekdays = weekdays
        self.every_day, self.every_weekday = every_day, every_weekday
        # croniter reads day_or only where both day fields are restricted.
        self.day_or = day_or and not (every_day or every_weekday)
        self.has_seconds = has_seconds
        self.step = timedelta(seconds=1) if has_seconds else timedelta(minutes=1)

    def _day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = self.every_day or day.day in self.day_set
        in_week = self.every_weekday or (day.weekday() + 1) % 7 in self.weekdays
        return in_month or in_week if self.day_or else in_month and in_week

    def _time_from(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        """The first matching time of day at or after ``hour:minute:second``."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        for h in hours[bisect_left(hours, hour) :]:
            low_m = minute if h == hour else 0
            for m in minutes[bisect_left(minutes, low_m) :]:
                low_s = second if h == hour and m == minute else 0
                index = bisect_left(seconds, low_s)
                if index < len(seconds):
                    return h, m, seconds[index]
        return None

    def _time_until(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        """The last matching time of day at or before ``hour:minute:second``."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        for h in reversed(hours[: bisect_right(hours, hour)]):
            high_m = minute if h == hour else 59
            for m in reversed(minutes[: bisect_right(minutes, high_m)]):
                high_s = second if h == hour and m == minute else 59
                index = bisect_right(seconds, high_s)
                if index:
                    return h, m, seconds[index - 1]
        return None

    def next_after(self, start: datetime) -> datetime | None:
        """The first matching naive time strictly after the naive ``start`` (croniter's
        ``get_next``), or ``None`` if none comes within :data:`YEARS` years."""
        first = self._whole(start) + self.step
        day, limit = first.date(), first.year + YEARS
        found = self._time_from(first.hour, first.minute, first.second)
        while day.year <= limit:
            if self._day_matches(day) and found is not None:
                return datetime(day.year, day.month, day.day, *found)
            day = self._next_day(day)
            found = self.hours[0], self.minutes[0], self.seconds[0]
        return None

    def previous_before(self, start: datetime) -> datetime | None:
        """The last matching naive time strictly before the naive ``start`` (croniter's
        ``get_prev``), or ``None`` if none came within :data:`YEARS` years."""
        whole = self._whole(start)
        last = whole if whole < start else whole - self.step
        day, limit = last.date(), last.year - YEARS
        found = self._time_until(last.hour, last.minute, last.second)
        while day.year >= limit:
            if self._day_matches(day) and found is not None:
                return datetime(day.year, day.month, day.day, *found)
            day = self._previous_day(day)
            found = self.hours[-1], self.minutes[-1], self.seconds[-1]
        return None

    def _whole(self, moment: datetime) -> datetime:
        """``moment`` truncated to the expression's unit, the second or the minute."""
        if self.has_seconds:
            return moment.replace(microsecond=0)
        return moment.replace(second=0, microsecond=0)

    def _next_day(self, day: date) -> date:
        """The next day, or the first of the next matching month when that is later."""
        following = day + _DAY
        if following.month in self.months:
            return following
        months, year = self.months, following.year
        index = bisect_left(months, following.month)
        if index == len(months):
            return date(year + 1, months[0], 1)
        return date(year, months[index], 1)

    def _previous_day(self, day: date) -> date:
        """The day before, or the last of the previous matching month when that is earlier."""
        previous = day - _DAY
        if previous.month in self.months:
            return previous
        months, year = self.months, previous.year
        index = bisect_right(months, previous.month)
        month = months[index - 1] if index else months[-1]
        year = year if index else year - 1
        return date(year, month, calendar.monthrange(year, month)[1])


def fields(expression: str, *, day_or: bool) -> CronFields | None:
    """``expression``'s fields read for searching, with croniter's ``day_or``; ``None`` when a
    field uses one of croniter's extensions (``L``, ``#``, ``W``)."""
    parsed = croniter(expression)
    expanded = parsed.expanded
    if parsed.nth_weekday_of_month or parsed.nearest_weekday:
        return None
    seconds = _values(expanded[5], 60) if len(expanded) == 6 else (0,)
    minutes, hours = _values(expanded[0], 60), _values(expanded[1], 24)
    days, months = _values(expanded[2], 31, 1), _values(expanded[3], 12, 1)
    weekdays = _values(expanded[4], 7)
    if None in (seconds, minutes, hours, days, months, weekdays):
        return None
    assert seconds and minutes and hours and days and months and weekdays
    return CronFields(
        seconds,
        minutes,
        hours,
        days,
        months,
        frozenset(value % 7 for value in weekdays),
        has_seconds=len(expanded) == 6,
        every_day=expanded[2] == ["*"],
        every_weekday=expanded[4] == ["*"],
        day_or=day_or,
    )
