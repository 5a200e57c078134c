"""A one-off schedule (``at=``): a single tick at a moment, and the moment read from what
people type. Its interface is [Schedule][django_advisory_cron.core.schedule.Schedule]'s, so
that every caller stepping through ticks finds its one tick and then none."""

from __future__ import annotations

import contextlib
import zoneinfo
from datetime import datetime, timedelta, timezone

from django.conf import settings

from ..exceptions import InvalidSchedule
from .schedule import EPOCH, Schedule, local_moment, zone_problem

_UTC = timezone.utc


#: What a one-off answers for "the tick after" its moment and "the tick before" it: an instant
#: after any moment it accepts (``EARLIEST`` to ``LATEST_ONCE``) and one before any, so that
#: a caller stepping through ticks stops at them, as it does at a window's edge.
LATEST_ONCE = datetime(9999, 1, 1, tzinfo=_UTC)
AFTER_LAST = LATEST_ONCE
BEFORE_FIRST = EPOCH - timedelta(days=1)
#: The text ``--at`` (and ``at=`` as text) takes, as a refusal shows it.
AT_FORMAT = "YYYY-MM-DD HH:MM[:SS], or ISO 8601 with an offset"


def moment_problem(moment: datetime) -> str | None:
    """Why the aware ``moment`` cannot be a one-off's, or ``None``: it must lie from the Unix
    epoch to the year 9999 (every tick, deadline and jitter computed from it stays in range)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        return f"the moment {moment.isoformat(sep=' ')} has no time zone"
    if not EPOCH <= moment < LATEST_ONCE:
        return (
            f"the moment must be from {EPOCH:%Y-%m-%d} to {LATEST_ONCE:%Y-%m-%d} (UTC), not "
            f"{moment.isoformat(sep=' ')}"
        )
    return None


def read_moment(value: object, zone: str | None = None) -> datetime:
    """A one-off's moment from ``value``: an aware date-time, or a naive one or its text
    (``"2026-12-24 18:00"``, seconds allowed, or ISO 8601 with an offset) read in ``zone``
    (else ``TIME_ZONE``). Returns it in UTC; raises ``InvalidSchedule`` (a ``ValueError``),
    in one line, for anything else."""
    if zone is not None and (problem := zone_problem(zone)):
        raise InvalidSchedule(problem)
    moment = value
    if isinstance(value, str):
        text = " ".join(value.split())
        moment = None
        if len(text) > 10:  # a date alone is no moment: midnight is said, not implied
            with contextlib.suppress(ValueError):
                moment = datetime.fromisoformat(text)
    if not isinstance(moment, datetime):
        raise InvalidSchedule(f"at must be a date and time, {AT_FORMAT}, not {value!r}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        where = zoneinfo.ZoneInfo(zone or settings.TIME_ZONE or "UTC")
        try:
            moment = local_moment(moment.replace(tzinfo=None), where)
        except OverflowError:
            moment = moment.replace(tzinfo=_UTC)  # out of range: said below
    try:
        moment = moment.astimezone(_UTC)
    except OverflowError:
        raise InvalidSchedule(
            f"the moment must be from {EPOCH:%Y-%m-%d} to {LATEST_ONCE:%Y-%m-%d} (UTC), not "
            f"{value!r}"
        ) from None
    if problem := moment_problem(moment):
        raise InvalidSchedule(problem)
    return moment


class Once(Schedule):
    """A one-off: a single tick, at ``moment``. After its moment the next tick is
    ``AFTER_LAST``, before it the previous one is ``BEFORE_FIRST``, so that every caller
    stepping through ticks finds none there; ``last`` is its moment, which callers that ask
    whether a schedule has ended read."""

    def __init__(self, moment: datetime, zone: str | None = None) -> None:
        if zone is not None and (problem := zone_problem(zone)):
            raise InvalidSchedule(problem)
        if not isinstance(moment, datetime):
            raise InvalidSchedule(f"at must be a date-time, not {type(moment).__name__}")
        if problem := moment_problem(moment):
            raise InvalidSchedule(problem)
        self.zone = zone
        self.moment = moment.astimezone(_UTC)
        self.last = self.moment
        self.real_time = True
        self.has_seconds = bool(self.moment.second or self.moment.microsecond)
        self.expression = f"once at {self.moment.isoformat(sep=' ')}"

    def __repr__(self) -> str:
        return f"Once({self.moment.isoformat(sep=' ')})"

    def describe(self) -> str:
        """``once at 2026-12-24 18:00 (Europe/Berlin)``: the moment in its zone."""
        local = self.moment.astimezone(self._zone())
        spec = "seconds" if local.second or local.microsecond else "minutes"
        return f"once at {local.replace(tzinfo=None).isoformat(sep=' ', timespec=spec)} " + (
            f"({self.zone_name})"
        )

    @property
    def min_interval(self) -> timedelta:
        return AFTER_LAST - BEFORE_FIRST  # no second tick: any jitter fits

    def next_tick(self, after: datetime) -> datetime:
        """Its moment while ``after`` is before it, else ``AFTER_LAST``."""
        return self.moment if after.astimezone(_UTC) < self.moment else AFTER_LAST

    def previous_tick(self, before: datetime) -> datetime:
        """Its moment once ``before`` reached it, else ``BEFORE_FIRST``."""
        return self.moment if self.moment <= before.astimezone(_UTC) else BEFORE_FIRST
