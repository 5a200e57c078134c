"""Cron expressions and intervals -> ticks.

Expressions are standard five-field cron (or ``@hourly``-style aliases), or croniter's
six-field form whose sixth field is the *second* (``"0 2 * * * 30"`` is 02:00:30; croniter's
default, ``second_at_beginning=False``), evaluated in the schedule's own time zone (a job's
``timezone=``) or else the project's ``TIME_ZONE``, so ``"0 2 * * *"`` means 02:00 local time.
``Every`` is an interval schedule instead: its ticks are the Unix epoch plus whole
multiples of the interval, the same on every host, in every zone. A one-off, a single tick
at a moment (``at=``), read from a local time of its zone as a wall-clock expression reads
one, is [Once][django_advisory_cron.core.once.Once].

The two day fields follow Vixie cron's rule, and a range of one value is that value (see
``core/cron_reading.py``).

Daylight saving time follows Debian's cron (see ``docs/once-per-tick.md``). An expression whose
hour field names every hour (``"*/15 * * * *"``, ``"0 * * * *"``) is a *real-time* schedule:
it ticks at every real instant whose local time matches, so it ticks in both passes of a
repeated hour and not at all in a skipped one. Any other expression is a *wall-clock*
schedule: each local time it names ticks once, at its first occurrence when the clocks go
back, and a time the clocks skip ticks at the first instant after the gap (several skipped
times share that one tick).

Ticks are aware datetimes in UTC. In the schedule's zone a tick of the repeated hour would need
``fold``, which Python ignores when comparing or doing arithmetic within one zone (PEP 495):
callers subtracting or comparing ticks would silently be off by an hour that night.

Wall-clock times come from the expression's fields read once (``core/cron_fields.py``, as
croniter expands them); mapping them to instants happens here, because croniter itself ticks
twice for every repeated time and its results carry unreliable ``fold`` attributes. An ordinary
local time maps to its instant from one offset; only times where the zone's two readings
differ (a gap, a repeat) are searched.
"""

from __future__ import annotations

import functools
import math
import zoneinfo
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone, tzinfo
from itertools import pairwise
from typing import Any

from croniter import CroniterError, croniter
from django.conf import settings

from ..exceptions import InvalidSchedule
from . import cron_fields
from .cron_reading import day_reading, one_value_ranges

# A run is matched against ticks up to this far from its reference time, beyond ``MAX_SKEW``,
# so that a host whose clock is off from the database's still finds its tick.
CANDIDATE_MARGIN = timedelta(minutes=5)
#: At most this many candidate ticks are sent with a run: those nearest its reference time, so
#: a dense schedule (every few seconds) narrows the margin instead of losing the ticks that can
#: match (see ``Schedule.candidates``).
MAX_CANDIDATES = 64

#: Interval ticks are ``EPOCH + n * interval``.
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_UTC = timezone.utc
#: Where a new expression's first tick is looked for, to refuse one that never fires. The
#: matching days repeat every 400 years, and croniter searches 50 years from any start: the
#: rarest schedule it accepts (a weekday that is 29 February) fires at most 40 years apart.
_PROBE_START = datetime(2000, 1, 1, tzinfo=_UTC)
_SECOND = timedelta(seconds=1)
_MICROSECOND = timedelta(microseconds=1)


def zone_problem(name: object) -> str | None:
    """Why ``name`` is not a usable time zone name, or ``None`` when it is one."""
    if not isinstance(name, str):
        return f"timezone must be a time zone name such as 'Europe/Berlin', not {name!r}"
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory
        return (
            f"timezone {name!r} is not a known time zone; use an IANA name such as "
            "'Europe/Berlin' or 'America/New_York'"
        )
    return None


def _wall(instant: datetime, zone: tzinfo) -> datetime:
    """The naive local wall-clock time of an aware ``instant``."""
    return instant.astimezone(zone).replace(tzinfo=None)


def _occurrences(wall: datetime, zone: tzinfo) -> list[datetime]:
    """The UTC instants showing the naive local time ``wall``: two when the clocks go back
    over it, none when they skip it."""
    local = wall.replace(tzinfo=zone, fold=0)  # ``wall`` may carry a fold: read both
    offset = local.utcoffset()
    if offset is not None and offset == local.replace(fold=1).utcoffset():
        # Both readings agree (PEP 495): an ordinary local time, the usual case, at one instant.
        return [(wall - offset).replace(tzinfo=_UTC, fold=0)]
    found = {wall.replace(tzinfo=zone, fold=fold).astimezone(_UTC) for fold in (0, 1)}
    return sorted(t for t in found if _wall(t, zone) == wall)


def _transition(low: datetime, high: datetime, zone: tzinfo) -> datetime:
    """The first instant in ``(low, high]`` whose UTC offset differs from ``low``'s.

    Bisects to the second: the offsets are known at both ends, the instant of the change is
    not (``zoneinfo`` does not expose it), and transitions fall on whole seconds.
    """
    before = low.astimezone(zone).utcoffset()
    low = low.replace(microsecond=0)  # still before the change, which is on a whole second
    seconds = -(-(high - low) // _SECOND)  # the change is at most this many seconds after low
    while seconds > 1:
        half = seconds // 2
        if (low + half * _SECOND).astimezone(zone).utcoffset() == before:
            low, seconds = low + half * _SECOND, seconds - half
        else:
            seconds = half
    return low + seconds * _SECOND


def _gap_end(wall: datetime, zone: tzinfo) -> datetime:
    """The first instant after the spring-forward gap that swallowed the naive time ``wall``.

    PEP 495 reads a skipped time with the offsets on either side of the gap, which puts the
    transition between the two readings.
    """
    low, high = sorted(wall.replace(tzinfo=zone, fold=fold).astimezone(_UTC) for fold in (0, 1))
    return _transition(low, high, zone)


def _repeated(wall: datetime, zone: tzinfo) -> tuple[datetime, datetime] | None:
    """The naive ``[start, end)`` of the repeated interval ``wall`` lies in, if it does."""
    occurrences = _occurrences(wall, zone)
    if len(occurrences) < 2:
        return None
    start = _wall(_transition(occurrences[0], occurrences[1], zone), zone)
    return start, start + (occurrences[1] - occurrences[0])


def _smallest_gap(values: list[int], outer: int) -> int:
    """The smallest distance between consecutive matching values of one cron field, in its
    own unit, when matching periods of the enclosing field start ``outer`` units apart."""
    gaps = [later - earlier for earlier, later in pairwise(values)]
    return min([*gaps, outer - values[-1] + values[0]])


def _field(expanded: list[Any], size: int) -> list[int]:
    return list(range(size)) if expanded == ["*"] else sorted({int(value) for value in expanded})


#: Each field's name and the values it takes, in croniter's order (the second last).
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("weekday", 0, 7),
    ("second", 0, 59),
)


def _out_of_range(fields: list[str]) -> str | None:
    """``"hour 25 is out of range 0-23"`` for the first number of a field (in a list, a range
    or before a step) that the field does not take, else ``None``."""
    for text, (name, low, high) in zip(fields, _FIELDS[: len(fields)], strict=True):
        for part in text.split(","):
            for number in part.split("/")[0].split("-"):
                if number.isdigit() and not low <= int(number) <= high:
                    return f"{name} {int(number)} is out of range {low}-{high}"
    return None


@functools.lru_cache(maxsize=1024)
def _read_fields(text: str, day_or: bool) -> cron_fields.CronFields:
    return cron_fields.fields(text, day_or=day_or)


class NeverFires(InvalidSchedule):
    """A cron expression that is valid but has no tick: it matches no date (30 February), or
    it is ``@reboot``."""


def never_fires(expression: str) -> str:
    """The one-line error for a valid ``expression`` that matches no date."""
    return (
        f"{expression!r} never fires: no date matches its day of month, month and weekday "
        "fields (such as 30 February or 31 April); name a day that its months have, or L for "
        "the last day of the month"
    )


class Schedule:
    """A parsed cron expression: five fields, or six with the second last (croniter's order)."""

    #: A readable form of the schedule: the normalised cron expression, or ``"every 5s"``.
    expression: str
    #: Ticks at every real instant that matches (see the module docstring); interval
    #: schedules are always real-time.
    real_time: bool
    #: The IANA name of the zone the expression is evaluated in; ``None``: ``TIME_ZONE``.
    zone: str | None
    #: Its last tick, for a schedule that has one (a one-off); ``None``: it ticks forever.
    last: datetime | None = None

    def __init__(self, expression: str, zone: str | None = None) -> None:
        if zone is not None and (problem := zone_problem(zone)):
            raise InvalidSchedule(problem)
        self.zone = zone  # None: TIME_ZONE, read at each use (override_settings applies)
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidSchedule("a schedule must be a non-empty cron expression")
        expression = one_value_ranges(" ".join(expression.split()))
        fields = expression.split(" ")
        if not expression.startswith("@") and len(fields) not in (5, 6):
            raise InvalidSchedule(
                f"{expression!r} has {len(fields)} fields; use five (minute hour day month "
                "weekday) or six (minute hour day month weekday second)"
            )
        if expression == "@reboot":
            # Valid cron with no tick, as 30 February: refused where the job is declared.
            raise NeverFires(
                "'@reboot' runs when cron starts, at no time of day, so it has no ticks: run "
                "the job with 'manage.py runlocked NAME' where the host or container starts"
            )
        if not croniter.is_valid(expression):
            problem = _out_of_range(fields)
            raise InvalidSchedule(
                f"{expression!r} is not a valid cron expression"
                + (f": {problem}" if problem else "")
            )
        self.expression = expression
        expanded = croniter(expression).expanded
        #: True for six-field expressions (the sixth field is the second).
        self.has_seconds = len(expanded) == 6
        hours = expanded[1]
        # Real-time because the expression fires every hour: skipping a repeated hour would
        # leave an hour-long hole.
        self.real_time = hours == ["*"] or set(hours) >= set(range(24))
        self._expanded = expanded
        try:
            # Cheap: a fraction of a millisecond; a few when nothing matches.
            self._croniter(_PROBE_START).get_next(datetime)
        except CroniterError:
            raise NeverFires(never_fires(expression)) from None

    def _croniter(self, start: datetime) -> croniter:
        """croniter from ``start``, reading the day fields as cron does."""
        text, day_or = day_reading(self.expression)
        return croniter(text, start, day_or=day_or)

    @functools.cached_property
    def _fields(self) -> cron_fields.CronFields:
        """The fields read once for searching."""
        text, day_or = day_reading(self.expression)
        return _read_fields(text, day_or)

    @property
    def min_interval(self) -> timedelta:
        """The shortest time between two ticks, from the second, minute and hour fields.

        A lower bound on ordinary days: it assumes every day matches. It ignores daylight saving
        time, though: on the spring-forward night a wall-clock schedule's skipped times tick at
        the end of the gap, which may be closer than that to the next tick.
        """
        seconds = _field(self._expanded[5], 60) if self.has_seconds else [0]
        minutes, hours = _field(self._expanded[0], 60), _field(self._expanded[1], 24)
        hour_gap = _smallest_gap(hours, 24)
        minute_gap = _smallest_gap(minutes, hour_gap * 60)
        return timedelta(seconds=_smallest_gap(seconds, minute_gap * 60))

    @property
    def zone_name(self) -> str:
        """The name of the time zone the ticks are local times in."""
        return self.zone or settings.TIME_ZONE or "UTC"

    def _zone(self) -> tzinfo:
        return zoneinfo.ZoneInfo(self.zone_name)

    def __repr__(self) -> str:
        if self.zone is not None:
            return f"Schedule({self.expression!r}, zone={self.zone!r})"
        return f"Schedule({self.expression!r})"

    def _ticks_of(self, wall: datetime, zone: tzinfo) -> list[datetime]:
        """The ticks (UTC, ascending) that the matching local time ``wall`` produces."""
        occurrences = _occurrences(wall, zone)
        if self.real_time:
            return occurrences
        return occurrences[:1] or [_gap_end(wall, zone)]

    def _walls(self, start: datetime, step: str) -> Iterator[datetime]:
        """Matching naive wall-clock times after (``get_next``) or before (``get_prev``)."""
        fields = self._fields
        find = fields.next_after if step == "get_next" else fields.previous_before
        found = find(start)
        while found is not None:
            yield found
            found = find(found)
        raise self._none_within(start, step)

    def _none_within(self, start: datetime, step: str) -> InvalidSchedule:
        when = "after" if step == "get_next" else "before"
        return InvalidSchedule(
            f"{self.expression!r} has no tick within 50 years {when} "
            f"{start.isoformat(sep=' ', timespec='seconds')}; check its day of month, "
            "month and weekday fields"
        )

    def _first_wall(self, start: datetime, step: str) -> datetime:
        """The first matching wall-clock time after/before the naive ``start``, exclusive."""
        return next(self._walls(start, step))

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``."""
        zone, after = self._zone(), after.astimezone(_UTC)
        wall, found = _wall(after, zone), []
        start, repeated = wall, _repeated(wall, zone)
        if repeated is not None and after == _occurrences(wall, zone)[0]:
            # First pass of a repeated hour: the repeated times up to ``wall`` come round
            # again, which is a tick for a real-time schedule.
            again = self._first_wall(repeated[0] - _MICROSECOND, "get_next")
            if self.real_time and again <= wall:
                found.append(self._ticks_of(again, zone)[-1])
        elif repeated is not None and not self.real_time:
            # Second pass: the rest of the repeated hour had its (only) ticks the first time.
            start = repeated[1] - _MICROSECOND
        for later in self._walls(start, "get_next"):
            # The first wall time with a tick after ``after`` has the earliest one: ticks grow
            # with their wall time, and the exceptions are handled above.
            ticks = [tick for tick in self._ticks_of(later, zone) if tick > after]
            if ticks:
                return min([*found, ticks[0]])
        raise AssertionError("unreachable: croniter iterates forever")

    def previous_tick(self, before: datetime) -> datetime:
        """The last tick at or before ``before``."""
        zone, before = self._zone(), before.astimezone(_UTC)
        wall, found = _wall(before, zone), []
        repeated = _repeated(wall, zone)
        if repeated is not None and before == _occurrences(wall, zone)[1]:
            # Second pass of a repeated hour: the rest of it already happened, the first time.
            last = self._first_wall(repeated[1], "get_prev")
            if last > wall:
                found.append(self._ticks_of(last, zone)[0])
        for earlier in self._walls(wall + _MICROSECOND, "get_prev"):
            ticks = [tick for tick in self._ticks_of(earlier, zone) if tick <= before]
            if ticks:
                return max([*found, ticks[-1]])
        raise AssertionError("unreachable: croniter iterates forever")

    def ticks_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Ticks in ``[start, end]``, at most :data:`MAX_CANDIDATES`."""
        # Compare in UTC: two datetimes in one zone compare by wall clock, ignoring ``fold``.
        start, end = start.astimezone(_UTC), end.astimezone(_UTC)
        tick = self.previous_tick(start)
        if tick < start:
            tick = self.next_tick(tick)
        for _ in range(MAX_CANDIDATES):
            if tick > end:
                return
            yield tick
            tick = self.next_tick(tick)

    def _nearest(self, center: datetime, reach: timedelta) -> list[datetime]:
        """Ticks within ``reach`` of ``center``, ascending: the :data:`MAX_CANDIDATES` nearest
        to ``center`` when there are more."""
        center = center.astimezone(_UTC)  # arithmetic in a DST zone is wall-clock arithmetic
        found: list[datetime] = []
        tick = self.previous_tick(center)
        for _ in range(MAX_CANDIDATES):
            if tick < center - reach:
                break
            found.append(tick)
            tick = self.previous_tick(tick - _MICROSECOND)
        tick = self.next_tick(center)
        for _ in range(MAX_CANDIDATES):
            if tick > center + reach:
                break
            found.append(tick)
            tick = self.next_tick(tick)
        return sorted(sorted(found, key=lambda tick: (abs(tick - center), tick))[:MAX_CANDIDATES])

    def candidates(self, around: datetime, max_skew: float) -> list[datetime]:
        """Ticks that a run whose reference time is near ``around`` may belong to: those within
        ``max_skew`` plus :data:`CANDIDATE_MARGIN` of it, at most :data:`MAX_CANDIDATES`.

        For a dense schedule the cap keeps the ticks *nearest* ``around`` (every 2 s: those
        within about 64 s), so the ticks that can match are never crowded out; only the margin
        for a host clock that is off from the database's shrinks.
        """
        return self._nearest(around, timedelta(seconds=max_skew) + CANDIDATE_MARGIN)

    def matches(self, around: datetime, max_skew: float) -> list[tuple[datetime, datetime]]:
        """``(instant, tick)`` pairs a run near ``around`` is matched against: each candidate
        tick at its own instant and, for a wall-clock schedule, also at the second occurrence
        of its local time when the clocks go back (02:30 CET belongs to the 02:30 CEST tick,
        so a cron firing at the repeated time finds the tick taken)."""
        window = timedelta(seconds=max_skew) + CANDIDATE_MARGIN
        pairs = [(tick, tick) for tick in self.candidates(around, max_skew)]
        if not self.real_time:
            pairs += [(again, tick) for again, tick in self._repeats_near(around, window)]
        return pairs

    def nearest_tick(self, at: datetime, max_skew: float) -> datetime | None:
        """The tick nearest to ``at`` within ``max_skew`` seconds, else ``None``.

        For a wall-clock schedule, the second occurrence of a repeated local time that is a
        tick (02:30 CET after 02:30 CEST) is no tick of its own but still *belongs* to that
        tick: a time within ``max_skew`` of it maps to the first occurrence. A scheduler that
        fires at the repeated local time again (croniter-based ones do) then finds the tick
        already taken and skips, instead of running unscheduled.
        """
        skew, at = timedelta(seconds=max_skew), at.astimezone(_UTC)
        options = [(abs(tick - at), tick) for tick in (self.previous_tick(at), self.next_tick(at))]
        if not self.real_time:
            options += [(abs(again - at), tick) for again, tick in self._repeats_near(at, skew)]
        distance, best = min(options, key=lambda option: (option[0], option[1].astimezone(_UTC)))
        return best if distance <= skew else None

    def _repeats_near(self, at: datetime, skew: timedelta) -> list[tuple[datetime, datetime]]:
        """``(second occurrence, tick)`` for ticks whose local time comes round again within
        ``skew`` of ``at``.

        Probing both ends of the window finds a second pass that starts or ends inside it.
        """
        zone, at, found = self._zone(), at.astimezone(_UTC), {}
        for probe in (at - skew, at, at + skew):
            occurrences = _occurrences(_wall(probe, zone), zone)
            if len(occurrences) < 2 or probe != occurrences[1]:
                continue  # not in the second pass of a repeated hour
            shift = occurrences[1] - occurrences[0]
            for tick in self._nearest(at - shift, skew):
                again = _occurrences(_wall(tick, zone), zone)
                if len(again) == 2 and again[0] == tick and abs(again[1] - at) <= skew:
                    found[tick] = again[1]
        return [(again, tick) for tick, again in sorted(found.items())]


def seconds_text(seconds: float) -> str:
    """``90.5`` -> ``"90.5"``: seconds to the microsecond, without trailing zeros."""
    return f"{seconds:.6f}".rstrip("0").rstrip(".")


def describe_interval(interval: timedelta) -> str:
    """``timedelta(seconds=90)`` -> ``"every 1m30s"``; fractions of a second in seconds."""
    if interval % _SECOND:
        return f"every {seconds_text(interval / _SECOND)}s"
    rest, parts = int(interval / _SECOND), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "every " + "".join(parts)


def as_interval(every: timedelta | float) -> timedelta:
    """``every`` as a positive ``timedelta`` (a number is seconds); else ``InvalidSchedule``
    (a ``ValueError``)."""
    positive = (
        "every must be a positive duration: a timedelta, or a finite number of seconds above 0"
    )
    if isinstance(every, (int, float)) and not isinstance(every, bool):
        if not (math.isfinite(every) and every > 0):  # NaN compares false with everything
            raise InvalidSchedule(f"{positive}, not {every!r}")
        try:
            every = timedelta(seconds=every)
        except OverflowError:
            raise InvalidSchedule(f"every={every!r} is too long") from None
    if not isinstance(every, timedelta):
        raise InvalidSchedule(
            f"every must be a timedelta or a number of seconds, not {type(every).__name__}"
        )
    if every <= timedelta(0):
        raise InvalidSchedule(f"{positive}, not {every.total_seconds():g} seconds")
    return every


class Every(Schedule):
    """An interval schedule: ticks at ``EPOCH + n * interval`` (UTC), for every integer ``n``.

    Aligned to the Unix epoch rather than to a start time, so every replica computes the same
    ticks without coordination; time zones and daylight saving time play no part. Same
    interface as a cron schedule (``expression`` reads ``"every 5s"``; ``zone`` is ``None``
    and ``zone_name`` is ``"UTC"``).
    """

    def __init__(self, every: timedelta | float) -> None:
        self.zone = None
        self.interval = as_interval(every)
        self.expression = describe_interval(self.interval)
        self.real_time = True
        self.has_seconds = bool(self.interval % timedelta(minutes=1))

    def __repr__(self) -> str:
        return f"Every({seconds_text(self.interval / _SECOND)})"

    @property
    def min_interval(self) -> timedelta:
        return self.interval

    @property
    def zone_name(self) -> str:
        return "UTC"

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``."""
        return EPOCH + ((after.astimezone(_UTC) - EPOCH) // self.interval + 1) * self.interval

    def previous_tick(self, before: datetime) -> datetime:
        """The last tick at or before ``before``."""
        return EPOCH + ((before.astimezone(_UTC) - EPOCH) // self.interval) * self.interval


def local_moment(wall: datetime, zone: tzinfo) -> datetime:
    """The instant (UTC) of the naive local time ``wall`` in ``zone``, as a wall-clock cron
    schedule reads it: a repeated time is its first occurrence, a time the clocks skip is the
    first instant after the gap."""
    occurrences = _occurrences(wall, zone)
    return occurrences[0] if occurrences else _gap_end(wall, zone)


def validate(expression: str) -> str | None:
    """Return an error message for an invalid expression, else ``None``."""
    try:
        Schedule(expression)
    except InvalidSchedule as error:
        return str(error)
    return None
