"""The matching wall-clock times of a cron expression, from its fields as croniter expands them.

croniter parses an expression again for every starting point and steps through it with dates
it builds and checks, about a tenth of a millisecond per time; a schedule asks for a time on
every tick, preview and backfill. Plain fields (numbers, lists, ranges, steps, names) are
read here once into sorted values and searched directly, jumping from a month to its next
matching day and that day's first matching time. Day fields with croniter's extensions (``L``,
``#``, ``W``) are read by croniter, a month at a time: the days it matches in a month are kept
like the others.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Literal

from croniter import CroniterBadDateError, croniter

#: Months whose matching days one expression keeps (a few years' worth, for any schedule).
_MONTHS_KEPT = 64
#: How far the search goes, as croniter's: an expression with no time in it is refused.
YEARS = 50


def _values(expanded: Sequence[object], size: int, first: int = 0) -> tuple[int, ...]:
    """A field's matching values, ascending (croniter reads a ``*`` in a list as the field's
    every value)."""
    if "*" in expanded:
        return tuple(range(first, first + size))
    return tuple(sorted({value for value in expanded if isinstance(value, int)}))


def _last_or_nearest(
    days: frozenset[int], last: bool, nearest: frozenset[int]
) -> Callable[[int, int], tuple[int, ...]]:
    """A month's days for a day of month field with ``L`` (the last day, beside listed days)
    or ``W`` (the weekday nearest to a day, croniter's reading), the weekday field ``*``."""

    def month_days(year: int, month: int) -> tuple[int, ...]:
        length = calendar.monthrange(year, month)[1]
        found = {day for day in days if day <= length} if not nearest else set()
        if last:
            found.add(length)
        for wanted in nearest:
            day = min(wanted, length)
            weekday = calendar.weekday(year, month, day)  # Monday is 0
            if weekday == 5:  # Saturday: the Friday before, or the Monday after the 1st
                day = day - 1 if day > 1 else day + 2
            elif weekday == 6:  # Sunday: the Monday after, or the Friday before the last day
                day = day + 1 if day < length else day - 2
            found.add(day)
        return tuple(sorted(found))

    return month_days


def _nth_weekdays(nth: dict[int, set[int | Literal["l"]]]) -> Callable[[int, int], tuple[int, ...]]:
    """A month's days for a weekday field of ``#`` (``1#2``: the second Monday) and ``L``
    (``L5``: the last Friday), the day of month field ``*``."""

    def month_days(year: int, month: int) -> tuple[int, ...]:
        length = calendar.monthrange(year, month)[1]
        first = (calendar.weekday(year, month, 1) + 1) % 7  # cron's weekday: Sunday is 0
        found = set()
        for weekday, which in nth.items():
            dates = range(1 + (weekday - first) % 7, length + 1, 7)
            for n in which:
                if n == "l":
                    found.add(dates[-1])
                elif n <= len(dates):
                    found.add(dates[n - 1])
        return tuple(sorted(found))

    return month_days


def _croniters_days(expression: str, day_or: bool) -> Callable[[int, int], tuple[int, ...]]:
    """A month's matching days as croniter finds them, where both day fields are restricted
    and one uses an extension: its midnights over that month (asked once a month)."""
    written = expression.split()
    midnights = f"0 0 {written[2]} * {written[4]}"

    def days(year: int, month: int) -> tuple[int, ...]:
        start = datetime(year, month, 1, tzinfo=timezone.utc) - timedelta(minutes=1)
        walk, found = croniter(midnights, start, day_or=day_or), []
        try:
            while (day := walk.get_next(datetime)).month == month and day.year == year:
                found.append(day.day)
        except CroniterBadDateError:  # none in this month, nor for years after it
            pass
        return tuple(found)

    return days


def _extended_days(
    parsed: croniter, expression: str, day_or: bool
) -> Callable[[int, int], tuple[int, ...]] | None:
    """How a month's days are found when a day field uses croniter's extensions (``L``,
    ``#``, ``W``); ``None`` when neither does."""
    expanded, nth, nearest = parsed.expanded, parsed.nth_weekday_of_month, parsed.nearest_weekday
    last = "l" in expanded[2] and "*" not in expanded[2]
    if not (nth or nearest or last):
        return None
    if "*" in expanded[4] and not nth:
        listed = frozenset(_values(expanded[2], 31, 1))
        return _last_or_nearest(listed, last, frozenset(int(day) for day in nearest))
    if "*" in expanded[2] and not nearest:
        return _nth_weekdays(nth)
    return _croniters_days(expression, day_or)


class CronFields:
    """One expression's fields, read once: each its sorted values, and how the days match
    (``month_days``: a month's matching days, for croniter's extensions)."""

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
        month_days: Callable[[int, int], tuple[int, ...]] | None = None,
    ) -> None:
        self.seconds, self.minutes, self.hours = seconds, minutes, hours
        self._days_of = month_days or self._matching_days
        self.day_set, self.months = frozenset(days), months
        self.weekdays = weekdays
        self.every_day, self.every_weekday = every_day, every_weekday
        # croniter reads day_or only where both day fields are restricted.
        self.day_or = day_or and not (every_day or every_weekday)
        self.has_seconds = has_seconds
        self.step = timedelta(seconds=1) if has_seconds else timedelta(minutes=1)
        self._earliest = hours[0], minutes[0], seconds[0]
        self._latest = hours[-1], minutes[-1], seconds[-1]
        self._month_cache: dict[tuple[int, int], tuple[int, ...]] = {}

    def _month_days(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of a matching month, ascending, worked out once per month."""
        days = self._month_cache.get((year, month))
        if days is None:
            days = self._days_of(year, month)
            if len(self._month_cache) >= _MONTHS_KEPT:
                self._month_cache.clear()
            self._month_cache[(year, month)] = days
        return days

    def _matching_days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of a month that the day of month and weekday fields match, with the rule."""
        length = calendar.monthrange(year, month)[1]
        first = (calendar.weekday(year, month, 1) + 1) % 7  # cron's weekday: Sunday is 0
        every_day, every_weekday, day_or = self.every_day, self.every_weekday, self.day_or
        day_set, weekdays = self.day_set, self.weekdays
        found = []
        for day in range(1, length + 1):
            in_month = every_day or day in day_set
            in_week = every_weekday or (first + day - 1) % 7 in weekdays
            if in_month or in_week if day_or else in_month and in_week:
                found.append(day)
        return tuple(found)

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
        ``get_next``), or ``None`` if none comes within :data:`YEARS` years.

        Jumps field by field: to the next matching month, its next matching day, and the
        first matching time of that day; only the starting day is searched from a time."""
        first = self._whole(start) + self.step
        year, month, limit = first.year, first.month, first.year + YEARS
        months = self.months
        if month in months:
            days = self._month_days(year, month)
            index = bisect_left(days, first.day)
            if index < len(days) and days[index] == first.day:
                found = self._time_from(first.hour, first.minute, first.second)
                if found is not None:
                    return datetime(year, month, first.day, *found)
                index += 1
            if index < len(days):
                return datetime(year, month, days[index], *self._earliest)
        index = bisect_right(months, month)
        while True:
            if index == len(months):
                year, index = year + 1, 0
                if year > limit:
                    return None
            month = months[index]
            days = self._month_days(year, month)
            if days:
                return datetime(year, month, days[0], *self._earliest)
            index += 1

    def previous_before(self, start: datetime) -> datetime | None:
        """The last matching naive time strictly before the naive ``start`` (croniter's
        ``get_prev``), or ``None`` if none came within :data:`YEARS` years; the same jumps
        backwards."""
        whole = self._whole(start)
        last = whole if whole < start else whole - self.step
        year, month, limit = last.year, last.month, last.year - YEARS
        months = self.months
        if month in months:
            days = self._month_days(year, month)
            index = bisect_right(days, last.day)
            if index and days[index - 1] == last.day:
                found = self._time_until(last.hour, last.minute, last.second)
                if found is not None:
                    return datetime(year, month, last.day, *found)
                index -= 1
            if index:
                return datetime(year, month, days[index - 1], *self._latest)
        index = bisect_left(months, month) - 1
        while True:
            if index < 0:
                year, index = year - 1, len(months) - 1
                if year < limit:
                    return None
            month = months[index]
            days = self._month_days(year, month)
            if days:
                return datetime(year, month, days[-1], *self._latest)
            index -= 1

    def _whole(self, moment: datetime) -> datetime:
        """``moment`` truncated to the expression's unit, the second or the minute."""
        if self.has_seconds:
            return moment.replace(microsecond=0)
        return moment.replace(second=0, microsecond=0)


def fields(expression: str, *, day_or: bool) -> CronFields:
    """``expression``'s fields read for searching, with croniter's ``day_or``."""
    parsed = croniter(expression)
    expanded = parsed.expanded
    seconds = _values(expanded[5], 60) if len(expanded) == 6 else (0,)
    return CronFields(
        seconds,
        _values(expanded[0], 60),
        _values(expanded[1], 24),
        _values(expanded[2], 31, 1),
        _values(expanded[3], 12, 1),
        frozenset(value % 7 for value in _values(expanded[4], 7)),
        has_seconds=len(expanded) == 6,
        every_day="*" in expanded[2],
        every_weekday="*" in expanded[4],
        day_or=day_or,
        month_days=_extended_days(parsed, expression, day_or),
    )
