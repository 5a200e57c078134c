"""The two day fields follow Vixie cron's rule (the cron of Debian and most Linux systems):
when the day-of-month or the day-of-week field *starts with* ``*`` (``*``, ``*/2``), a day must
match both; only when both are restricted otherwise does a day match either. ``0 0 */2 * 1`` is
an odd-numbered Monday (26 days in 2026), not every odd day and every Monday (212).

The engine is compared with an evaluator written here from that rule, minute by minute over
the days of a year, for generated expressions."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from croniter import croniter
from hypothesis import example, given, settings
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.contrib.django_q.schedules import unsyncable
from django_advisory_cron.core.cron_reading import (
    croniters_days_in_cron,
    days_unlike_croniter,
    one_value_ranges,
)
from django_advisory_cron.core.schedule import Schedule

UTC = timezone.utc
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
MINUTE = timedelta(minutes=1)


def _values(field: str, low: int, high: int) -> set[int]:
    """The numbers a numeric cron field names: ``*``, ``N``, ``N-M``, each with ``/STEP``,
    in a comma-separated list."""
    found: set[int] = set()
    for item in field.split(","):
        span, _, step = item.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = map(int, span.split("-"))
        else:
            first = last = int(span)
            if step:  # "N/STEP": from N to the end of the range
                last = high
        found.update(range(first, last + 1, int(step or 1)))
    return found


def vixie_ticks(expression: str, start: datetime, end: datetime) -> list[datetime]:
    """The ticks in ``[start, end)`` (UTC) by Vixie cron's own test, each minute of each day:
    minute, hour and month match, and the day fields as ``DOM_STAR``/``DOW_STAR`` say (a field
    whose first character is ``*``)."""
    minute, hour, dom, month, dow = expression.split()
    minutes, hours = _values(minute, 0, 59), _values(hour, 0, 23)
    doms, months = _values(dom, 1, 31), _values(month, 1, 12)
    dows = {day % 7 for day in _values(dow, 0, 7)}
    star = dom.startswith("*") or dow.startswith("*")
    found, day = [], start.date()
    while day < end.date():
        weekday = (day.weekday() + 1) % 7  # cron's 0 is Sunday
        by_date, by_weekday = day.day in doms, weekday in dows
        if day.month in months and ((by_date and by_weekday) if star else (by_date or by_weekday)):
            midnight = datetime.combine(day, datetime.min.time(), UTC)
            for at in range(24 * 60):
                if at // 60 in hours and at % 60 in minutes:
                    found.append(midnight + at * MINUTE)
        day += timedelta(days=1)
    return [tick for tick in found if start <= tick < end]


def engine_ticks(expression: str, start: datetime, end: datetime) -> list[datetime]:
    """The engine's ticks in ``[start, end)``, in UTC (where no clock changes)."""
    schedule, found = Schedule(expression, zone="UTC"), []
    tick = schedule.next_tick(start - timedelta(microseconds=1))
    while tick < end:
        found.append(tick)
        tick = schedule.next_tick(tick)
    return found


def _item(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    span = st.tuples(number, number).map(sorted)  # "5-5" too: one value, as cron reads it
    return st.one_of(
        number.map(str),
        span.map(lambda pair: f"{pair[0]}-{pair[1]}"),
        st.tuples(span, st.integers(1, 9)).map(lambda step: f"{step[0][0]}-{step[0][1]}/{step[1]}"),
        st.integers(1, 9).map(lambda step: f"*/{step}"),
    )


def _day_field(low: int, high: int) -> st.SearchStrategy[str]:
    """``*``, or a list whose first item may itself start with ``*``."""
    return st.one_of(st.just("*"), st.lists(_item(low, high), min_size=1, max_size=3).map(",".join))


expressions = st.builds(
    lambda minute, hour, dom, month, dow: f"{minute} {hour} {dom} {month} {dow}",
    st.integers(0, 59),
    st.integers(0, 23),
    _day_field(1, 31),
    st.one_of(st.just("*"), _item(1, 12)),
    _day_field(0, 7),
)


@pytest.mark.parametrize(
    ("expression", "runs"),
    [
        ("0 0 */2 * 1", 26),  # an odd-numbered Monday: both, as the field starts with *
        ("0 0 1-31/2 * 1", 212),  # the same days spelled without *: either
        ("0 0 1 * */2", 8),  # a 1st that is a Sunday, Tuesday, Thursday or Saturday
        ("0 0 13 * 5", 12 + 52 - 3),  # the 13th or a Friday (three Fridays are the 13th)
        ("0 0 * * 1", 52),
        ("0 0 13 * *", 12),
        ("0 0 */1 * 0-6", 365),
    ],
)
def test_the_day_fields_follow_vixie_crons_rule(expression: str, runs: int) -> None:
    ticks = engine_ticks(expression, *YEAR)
    assert len(ticks) == runs
    assert ticks == vixie_ticks(expression, *YEAR)


@settings(max_examples=30, deadline=None)
@given(expression=expressions)
@example(expression="0 0 */2 * 1")
@example(expression="0 0 1,*/2 * 1")
@example(expression="0 0 5 * *,1")
@example(expression="0 0 1,*/2 * 0-6")  # croniter widens 0-6 to *: cron matches either
@example(expression="0 0 1,15 * 0-7")
@example(expression="0 0 13-13,*/2 * 5-5")
def test_the_engine_ticks_as_vixie_cron_over_a_year(expression: str) -> None:
    if not vixie_ticks(expression, *YEAR):
        return  # a schedule with no tick this year (30 February, or a rare one)
    assert engine_ticks(expression, *YEAR) == vixie_ticks(expression, *YEAR)


@pytest.mark.parametrize(
    ("expression", "runs"),
    [
        ("0 5-5 * * *", 365),  # croniter alone reads a range of one value as the whole field
        ("30 5-5/2 * * *", 365),  # and 5-5/2 as */2
        ("0 5-5,7 * * *", 2 * 365),
        ("0 0 13-13 * *", 12),
        ("0 0 * 4-4 *", 30),
        ("0 0 * * mon-mon", 52),
    ],
)
def test_a_range_of_one_value_is_that_value(expression: str, runs: int) -> None:
    ticks = engine_ticks(expression, *YEAR)
    assert len(ticks) == runs
    assert ticks == vixie_ticks(expression.replace("mon", "1"), *YEAR)


def test_previous_tick_follows_the_same_rule() -> None:
    schedule = Schedule("0 0 */2 * 1", zone="UTC")
    assert schedule.previous_tick(YEAR[1]).date() == date(2026, 12, 21)
    assert schedule.next_tick(YEAR[0]).date() == date(2026, 1, 5)


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("expression", "differs"),
    [
        ("0 0 */2 * 1", True),
        ("0 0 1 * */2", True),
        ("0 0 1-31/2 * 1", False),  # croniter and cron both match either day
        ("0 0 * * 1", False),
        ("0 0 5 * *,1", False),  # croniter, too, reads a weekday field starting with * as all
        ("0 0 1,*/2 * 0-6", True),  # every day for cron, odd-numbered days for croniter
        ("0 0 1,*/1 * 0-6", False),  # every day both ways, though croniter spells it apart
        ("@daily", False),
    ],
)
def test_django_q2_is_not_given_a_schedule_whose_days_croniter_reads_otherwise(
    expression: str, differs: bool
) -> None:
    """django-q2 runs a synced schedule with croniter's default, which matches either day."""
    job = locked_task(name="q2_days", schedule=expression)(lambda: None)
    assert days_unlike_croniter(expression) is differs
    assert (unsyncable(job) is not None) is differs


def croniter_ticks(expression: str, start: datetime, end: datetime) -> list[datetime]:
    """The ticks in ``[start, end)`` by croniter's default reading (django-q2's)."""
    walk, found = croniter(expression, start - timedelta(microseconds=1)), []
    tick = walk.get_next(datetime)
    while tick < end:
        found.append(tick)
        tick = walk.get_next(datetime)
    return found


@settings(max_examples=30, deadline=None)
@given(expression=expressions)
@example(expression="0 0 */2 * 1")
@example(expression="0 0 1 * */2")
@example(expression="0 0 1,*/2 * 0-6")
def test_croniters_days_written_for_cron_run_on_croniters_days(expression: str) -> None:
    """What a django-q2 Cron row is imported as (``cronjob import --from django-q2``)."""
    if not days_unlike_croniter(expression) or one_value_ranges(expression) != expression:
        return  # a one-value range: croniter reads it as the whole field, cron as its value
    written = croniters_days_in_cron(expression)
    assert written is not None
    assert engine_ticks(written, *YEAR) == croniter_ticks(expression, *YEAR)
