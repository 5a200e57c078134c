"""Cron expressions -> ticks.

Expressions are standard five-field cron (or ``@hourly``-style aliases), evaluated with croniter
in the project's ``TIME_ZONE``, so ``"0 2 * * *"`` means 02:00 local time.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator
from datetime import datetime, timedelta, tzinfo

from croniter import croniter
from django.conf import settings

from .exceptions import InvalidSchedule

# A run is matched against ticks up to this far from its reference time, beyond ``MAX_SKEW``,
# so that a host whose clock is off from the database's still finds its tick.
CANDIDATE_MARGIN = timedelta(minutes=5)
MAX_CANDIDATES = 64


def _zone() -> tzinfo:
    return zoneinfo.ZoneInfo(settings.TIME_ZONE or "UTC")


class Schedule:
    """A parsed cron expression."""

    def __init__(self, expression: str) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidSchedule("a schedule must be a non-empty cron expression")
        expression = " ".join(expression.split())
        fields = expression.split(" ")
        if not expression.startswith("@") and len(fields) != 5:
            raise InvalidSchedule(
                f"{expression!r} has {len(fields)} fields; use five: minute hour day month weekday"
            )
        if expression in ("@reboot",) or not croniter.is_valid(expression):
            raise InvalidSchedule(f"{expression!r} is not a valid cron expression")
        self.expression = expression

    def __repr__(self) -> str:
        return f"Schedule({self.expression!r})"

    def _iter(self, start: datetime) -> croniter:
        return croniter(self.expression, start.astimezone(_zone()))

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``."""
        tick: datetime = self._iter(after).get_next(datetime)
        return tick

    def previous_tick(self, before: datetime) -> datetime:
        """The last tick at or before ``before``."""
        probe = before + timedelta(microseconds=1)
        tick: datetime = self._iter(probe).get_prev(datetime)
        return tick

    def ticks_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Ticks in ``[start, end]``, at most :data:`MAX_CANDIDATES`."""
        tick = self.previous_tick(start)
        if tick < start:
            tick = self.next_tick(tick)
        for _ in range(MAX_CANDIDATES):
            if tick > end:
                return
            yield tick
            tick = self.next_tick(tick)

    def candidates(self, around: datetime, max_skew: float) -> list[datetime]:
        """Ticks that a run whose reference time is near ``around`` may belong to."""
        window = timedelta(seconds=max_skew) + CANDIDATE_MARGIN
        return list(self.ticks_between(around - window, around + window))

    def nearest_tick(self, at: datetime, max_skew: float) -> datetime | None:
        """The tick nearest to ``at`` within ``max_skew`` seconds, else ``None``."""
        before, after = self.previous_tick(at), self.next_tick(at)
        best = min((before, after), key=lambda tick: abs((tick - at).total_seconds()))
        return best if abs((best - at).total_seconds()) <= max_skew else None

    def interval(self, around: datetime) -> timedelta:
        """The gap between the ticks on either side of ``around``."""
        previous = self.previous_tick(around)
        return self.next_tick(previous) - previous


def validate(expression: str) -> str | None:
    """Return an error message for an invalid expression, else ``None``."""
    try:
        Schedule(expression)
    except InvalidSchedule as error:
        return str(error)
    return None
