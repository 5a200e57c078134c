"""A schedule's ticks are those of a plain reference that steps through every instant: for
random expressions, zones with daylight saving time (Berlin, New York, Lord Howe's half hour,
St John's, Apia's skipped day) and starting moments, often beside a change of the clocks,
``next_tick``, ``previous_tick`` and ``ticks_between`` give the reference's ticks.

The reference reads the rule of ``core/schedule.py``'s docstring literally, one instant at a
time: a real-time schedule ticks at every instant whose local time matches; a wall-clock one at
the first instant showing a matching local time, and at the first instant after a gap for the
matching times the gap swallowed. It is slow, so a window is a day and a half (an hour and a
half for a six-field expression); the long searches are held to croniter in test_cron_fields.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter
from django.test import override_settings
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from django_advisory_cron.core.cron_reading import day_reading, one_value_ranges
from django_advisory_cron.core.schedule import MAX_CANDIDATES, Schedule
from django_advisory_cron.exceptions import InvalidSchedule

UTC = timezone.utc
MICROSECOND = timedelta(microseconds=1)
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/St_Johns",
    "Pacific/Apia",
]


def reference_ticks(
    expression: str, zone_name: str, start: datetime, end: datetime
) -> list[datetime]:
    """The ticks in ``(start, end]``, found by looking at every whole minute (second) in it."""
    text, day_or = day_reading(one_value_ranges(" ".join(expression.split())))
    expanded = croniter(text).expanded
    sizes = [(60, 0), (24, 0), (31, 1), (12, 1), (7, 0), (60, 0)]
    values = [
        set(range(first, first + size)) if field == ["*"] else {int(v) for v in field}
        for field, (size, first) in zip(expanded, sizes, strict=False)
    ]
    seconds = values[5] if len(values) == 6 else {0}
    weekdays = {value % 7 for value in values[4]}
    either = day_or and expanded[2] != ["*"] and expanded[4] != ["*"]
    real_time = values[1] == set(range(24))
    unit = timedelta(seconds=1 if len(values) == 6 else 60)
    zone = ZoneInfo(zone_name)

    def matches(wall: datetime) -> bool:
        in_month, in_week = wall.day in values[2], (wall.weekday() + 1) % 7 in weekdays
        days = in_month or in_week if either else in_month and in_week
        return (
            days
            and wall.month in values[3]
            and wall.hour in values[1]
            and wall.minute in values[0]
            and wall.second in seconds
        )

    def wall(instant: datetime) -> datetime:
        return instant.astimezone(zone).replace(tzinfo=None)  # keeps the fold: second pass

    instant = datetime.fromtimestamp(
        (start.timestamp() // unit.total_seconds() + 1) * unit.total_seconds(), UTC
    )
    found, before = [], wall(instant - unit)
    while instant <= end:
        now = wall(instant)
        if real_time:
            tick = matches(now)
        else:
            skipped, moment = [], before.replace(fold=0) + unit
            while moment < now.replace(fold=0):  # local times the clocks jumped over
                skipped.append(moment)
                moment += unit
            tick = (now.fold == 0 and matches(now)) or any(map(matches, skipped))
        if tick:
            found.append(instant)
        before, instant = now, instant + unit
    return found


@functools.lru_cache(maxsize=256)
def changes(zone_name: str, year: int) -> tuple[datetime, ...]:
    """The instants in ``year`` at which ``zone_name``'s clocks change, to the second."""
    zone, found = ZoneInfo(zone_name), []
    hour = datetime(year, 1, 1, tzinfo=UTC)
    while hour.year == year:
        later = hour + timedelta(hours=1)
        if hour.astimezone(zone).utcoffset() != later.astimezone(zone).utcoffset():
            low, high = hour, later  # the change is in (low, high]
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                same = middle.astimezone(zone).utcoffset() == hour.astimezone(zone).utcoffset()
                low, high = (middle, high) if same else (low, middle)
            found.append(high.replace(microsecond=0))
        hour = later
    return tuple(found)


def field(low: int, high: int, star: float) -> st.SearchStrategy[str]:
    """One cron field, ``*`` with about the weight ``star``: a step, a range, a list."""
    number = st.integers(low, high)
    others = st.one_of(
        st.integers(1, high - low + 1).map(lambda step: f"*/{step}"),
        st.tuples(number, number, st.sampled_from(["", "/2", "/3"])).map(
            lambda t: f"{min(t[:2])}-{max(t[:2])}{t[2]}"
        ),
        st.lists(number, min_size=1, max_size=3).map(lambda values: ",".join(map(str, values))),
    )
    return st.one_of(st.just("*"), others) if star >= 0.5 else st.one_of(others, st.just("*"))


#: Expressions with ticks in most windows: the day fields mostly ``*``, the hours often all.
expressions = st.one_of(
    st.tuples(
        field(0, 59, 0.2),
        field(0, 23, 0.5),
        field(1, 31, 0.9),
        field(1, 12, 0.9),
        field(0, 7, 0.6),
        st.just("") | field(0, 59, 0.2),
    ).map(lambda fields: " ".join(part for part in fields if part)),
    st.sampled_from(
        [
            "* * * * *",
            "0 2 * * *",
            "30 2 * * *",
            "*/15 9-17 * * 1-5",
            "*/15 * * * *",
            "0 * * * *",
            "15,45 1-3 * * *",
            "0 0 * * *",
            "@hourly",
            "0 2 * * * 30",
            "*/20 2 * * * */15",
        ]
    ),
)


@st.composite
def windows(draw: st.DrawFn, seconds: bool) -> tuple[str, datetime, datetime]:
    """A zone and a window ``(start, end]``, often one with a change of its clocks in it."""
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.integers(1990, 2060))
    span = timedelta(minutes=90) if seconds else timedelta(hours=36)
    near, beside_a_change = changes(zone, year), draw(st.booleans())
    if near and beside_a_change:
        change = draw(st.sampled_from(near))
        start = change - draw(st.timedeltas(timedelta(0), span))
    else:
        start = draw(st.datetimes(datetime(year, 1, 1), datetime(year, 12, 31))).replace(tzinfo=UTC)
    start += draw(st.sampled_from([timedelta(0), MICROSECOND, -MICROSECOND]))
    return zone, start, start + span


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, datetime, datetime]:
    expression = draw(expressions)
    zone, start, end = draw(windows(len(expression.split()) == 6))
    return expression, zone, start, end


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@example(
    (
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 10, 24, 21, tzinfo=UTC),
        datetime(2026, 10, 26, tzinfo=UTC),
    )
)
@example(
    (
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 3, 28, 21, tzinfo=UTC),
        datetime(2026, 3, 30, tzinfo=UTC),
    )
)
@example(
    (
        "*/15 * * * *",
        "America/New_York",
        datetime(2026, 11, 1, 4, tzinfo=UTC),
        datetime(2026, 11, 2, tzinfo=UTC),
    )
)
@example(
    (
        "0,30 2 * * *",
        "Australia/Lord_Howe",
        datetime(2026, 4, 4, 12, tzinfo=UTC),
        datetime(2026, 4, 5, 23, tzinfo=UTC),
    )
)
@example(
    (
        "0,30 2 * * *",
        "Australia/Lord_Howe",
        datetime(2026, 10, 3, 12, tzinfo=UTC),
        datetime(2026, 10, 4, 23, tzinfo=UTC),
    )
)
@example(
    (
        "0 12 * * *",
        "Pacific/Apia",
        datetime(2011, 12, 29, tzinfo=UTC),
        datetime(2011, 12, 31, tzinfo=UTC),
    )
)
@example(
    (
        "*/20 2 * * * */15",
        "Europe/Berlin",
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 59, tzinfo=UTC),
    )
)
def test_the_ticks_of_a_reference_that_steps_through_every_instant(
    case: tuple[str, str, datetime, datetime],
) -> None:
    expression, zone, start, end = case
    try:
        schedule = Schedule(expression, zone=zone)
    except InvalidSchedule:  # one that never fires, such as 30 February
        assume(False)
        return
    expected = reference_ticks(expression, zone, start, end)

    forward, tick = [], schedule.next_tick(start)
    while tick <= end:
        forward.append(tick.astimezone(UTC))
        tick = schedule.next_tick(tick)
    assert forward == expected, "next_tick"

    backward, tick = [], schedule.previous_tick(end)
    while tick > start:
        backward.append(tick.astimezone(UTC))
        tick = schedule.previous_tick(tick - MICROSECOND)
    assert backward[::-1] == expected, "previous_tick"

    between = [tick.astimezone(UTC) for tick in schedule.ticks_between(start + MICROSECOND, end)]
    assert between == expected[:MAX_CANDIDATES], "ticks_between"


@override_settings(TIME_ZONE="Australia/Lord_Howe")
def test_the_reference_reads_the_zone_of_time_zone_too() -> None:
    """A schedule with no zone of its own is read in ``TIME_ZONE``, as the reference is."""
    start = datetime(2026, 10, 3, 12, tzinfo=UTC)  # Lord Howe: 02:00 -> 02:30 on 4 October
    end = start + timedelta(hours=36)
    schedule, ticks, tick = Schedule("10 2 * * *"), [], start
    while (tick := schedule.next_tick(tick)) <= end:
        ticks.append(tick.astimezone(UTC))
    assert ticks == reference_ticks("10 2 * * *", "Australia/Lord_Howe", start, end)
