"""A job's jitter (issue 38, item 2): the offset every replica computes alike from the job's
name and the tick, and the jitter refused where it is declared or typed when it would reach
the next tick (the offsets of real replicas: tests/test_jitter.py)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core import checks
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron import locked_task, registry
from django_advisory_cron.checks.configuration import check_jobs
from django_advisory_cron.core.jitter import offset
from django_advisory_cron.jobs.catchup import plan
from django_advisory_cron.jobs.definitions import Definition
from django_advisory_cron.jobs.job import Job

UTC = timezone.utc
ticks = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
)
jitters = st.floats(min_value=1e-6, max_value=366 * 86400.0)
names = st.text(min_size=1, max_size=200)


def nothing() -> None:
    return None


@given(names, ticks, jitters)
def test_the_offset_is_from_zero_up_to_below_the_jitter(
    name: str, tick: datetime, jitter: float
) -> None:
    drawn = offset(name, tick, jitter)
    assert timedelta(0) <= drawn < timedelta(seconds=jitter)


@given(names, ticks, jitters)
def test_every_process_computes_the_same_offset_whatever_the_tick_s_zone(
    name: str, tick: datetime, jitter: float
) -> None:
    berlin = tick.astimezone(ZoneInfo("Europe/Berlin"))
    assert offset(name, tick, jitter) == offset(name, berlin, jitter) == offset(name, tick, jitter)


@given(names, ticks)
def test_no_jitter_is_no_offset(name: str, tick: datetime) -> None:
    assert offset(name, tick, None) == offset(name, tick, 0) == timedelta(0)


def test_the_offsets_spread_over_the_jitter() -> None:
    """A minute's jitter over a day of ticks of one job: each tenth of the minute gets about a
    tenth of the ticks; and 1,000 jobs due at midnight start at about 1,000 different times."""
    start = datetime(2026, 12, 6, tzinfo=UTC)
    day = [start + timedelta(minutes=n) for n in range(1440)]
    tenths = Counter(int(offset("digest", tick, 60).total_seconds() // 6) for tick in day)
    assert sorted(tenths) == list(range(10))
    assert all(100 <= count <= 190 for count in tenths.values()), tenths
    herd = {offset(f"job{n}", start, 60) for n in range(1000)}
    assert len(herd) > 990


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"every": 10, "jitter": 10}, "the jitter (10 s) must be shorter than the shortest "),
        ({"schedule": "*/5 * * * *", "jitter": timedelta(minutes=5)}, "interval between its "),
        ({"schedule": "0 2,3 * * *", "jitter": 3600}, "ticks (3600 s)"),
        ({"every": 10, "jitter": -1}, "jitter must be a finite number of seconds from 0"),
        ({"every": 10, "jitter": "5"}, "jitter must be seconds or a timedelta"),
    ],
)
def test_a_jitter_that_reaches_the_next_tick_is_refused_when_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^@locked_task 'herd': ") as raised:
        locked_task(name="herd", **options)(nothing)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert "herd" not in registry


@pytest.mark.usefixtures("fresh_registry")
def test_a_jitter_is_seconds_or_a_timedelta_below_the_interval() -> None:
    minutes = locked_task(name="a", schedule="*/5 * * * *", jitter=timedelta(seconds=299.5))
    assert minutes(nothing).jitter == 299.5
    assert locked_task(name="b", every=10, jitter=9)(nothing).jitter == 9
    assert locked_task(name="c", every=10, jitter=0)(nothing).jitter is None


@pytest.mark.usefixtures("fresh_registry")
def test_a_jitter_that_gets_past_the_decorator_is_a_check_error() -> None:
    registry.register(Job(func=nothing, name="built_by_hand", every=timedelta(seconds=5), jitter=5))
    messages = check_jobs()
    assert [message.id for message in messages] == ["django_advisory_cron.E025"]
    assert isinstance(messages[0], checks.Error) and "'built_by_hand'" in messages[0].msg


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({"every": 60, "jitter": 60}, True),
        ({"every": 60, "jitter": 59.9}, False),
        ({"cron": "0 * * * *", "jitter": 3600}, True),
        ({"cron": "0 0 * * *", "jitter": 3600}, False),
    ],
)
def test_a_schedule_kept_as_data_is_held_to_the_same_rule(
    values: dict[str, Any], refused: bool
) -> None:
    problems = Definition(name="herd", command="check", **values).problems()
    jitter = [line for line in problems if "jitter" in line]
    assert bool(jitter) == refused
    if refused:
        assert jitter[0].startswith("the jitter (")


def test_max_lateness_counts_from_the_tick_s_start() -> None:
    """A tick waited out its offset is on time: its lateness starts at the tick plus it."""
    job = Job(func=nothing, name="spread", every=timedelta(hours=1), jitter=3000, max_lateness=1)
    tick = datetime(2026, 12, 6, 2, tzinfo=UTC)
    start = tick + offset("spread", tick, 3000)
    assert plan(job, tick, start + timedelta(seconds=0.5)).run == [tick]
    assert plan(job, tick, start + timedelta(seconds=2)).too_late == [tick]


@pytest.mark.usefixtures("fresh_registry")
def test_an_override_must_leave_room_for_its_code_job_s_jitter() -> None:
    locked_task(name="spread", every=60, jitter=50)(nothing)
    shorter = Definition(name="spread", override=True, every=10).problems()
    assert shorter == ["the jitter (50 s) must be shorter than the shortest interval between "
                       "its ticks (10 s)"]  # fmt: skip
    assert Definition(name="spread", override=True, every=120).problems() == []
