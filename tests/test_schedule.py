"""Schedules across daylight saving time: a local time runs once, as with Debian's cron.

Europe/Berlin, 2026: the clocks go back on 25 October (03:00 CEST -> 02:00 CET at 01:00Z, so
02:00-02:59 local happens twice) and forward on 29 March (02:00 CET -> 03:00 CEST at 01:00Z,
so 02:00-02:59 local never happens).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.schedule import Schedule
from tests.jobsapp.models import Marker

BERLIN = ZoneInfo("Europe/Berlin")
UTC = timezone.utc
HOUR = timedelta(hours=1)


def utc(day: str, hhmm: str, second: int = 0) -> datetime:
    """``utc("10-25", "00:30")`` is 2026-10-25 00:30:00Z."""
    month, dom = map(int, day.split("-"))
    hour, minute = map(int, hhmm.split(":"))
    return datetime(2026, month, dom, hour, minute, second, tzinfo=UTC)


# Six hours around each transition, 23:00 to 05:00 local time.
FALL_BACK = (utc("10-24", "21:00"), utc("10-25", "03:00"))
SPRING_FORWARD = (utc("03-28", "22:00"), utc("03-29", "03:00"))


@pytest.fixture(autouse=True)
def berlin() -> Iterator[None]:
    with override_settings(TIME_ZONE="Europe/Berlin"):
        yield


def ticks(expression: str, window: tuple[datetime, datetime]) -> list[datetime]:
    """The ticks in ``window``, in UTC; walking back with previous_tick must agree."""
    schedule = Schedule(expression)
    forward = [tick.astimezone(UTC) for tick in schedule.ticks_between(*window)]
    backward, cursor = [], window[1]
    while (tick := schedule.previous_tick(cursor).astimezone(UTC)) >= window[0]:
        backward.append(tick)
        cursor = tick - timedelta(microseconds=1)
    assert backward[::-1] == forward
    return forward


def in_utc(tick: datetime | None) -> datetime | None:
    """Compare ticks in UTC: Python never equates a repeated local time with another zone's."""
    return None if tick is None else tick.astimezone(UTC)


def every(step: timedelta, window: tuple[datetime, datetime]) -> list[datetime]:
    return [window[0] + step * i for i in range((window[1] - window[0]) // step + 1)]


# -- fall back: a repeated local time runs once, at its first occurrence ------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("30 2 * * *", [utc("10-25", "00:30")]),  # 02:30 CEST; not 02:30 CET (01:30Z)
        ("0 2 * * *", [utc("10-25", "00:00")]),  # 02:00 CEST; not 02:00 CET (01:00Z)
        ("30 1 * * *", [utc("10-24", "23:30")]),  # before the change: unaffected
        ("*/15 2 * * *", [utc("10-25", f"00:{m:02}") for m in (0, 15, 30, 45)]),
    ],
)
def test_fall_back_wall_clock_schedule_runs_a_repeated_time_once(
    expression: str, expected: list[datetime]
) -> None:
    assert ticks(expression, FALL_BACK) == expected


def test_fall_back_first_occurrence_is_the_summer_time_one() -> None:
    (tick,) = Schedule("30 2 * * *").ticks_between(*FALL_BACK)
    assert tick.utcoffset() == timedelta(0)  # ticks are UTC: no fold to get wrong
    local = tick.astimezone(BERLIN)
    assert local.utcoffset() == 2 * HOUR and (local.hour, local.minute) == (2, 30)


@pytest.mark.parametrize("expression", ["0 * * * *", "*/30 * * * *"])
def test_fall_back_hourly_and_more_often_run_on_real_time(expression: str) -> None:
    """Both passes of 02:xx run: the clock reads 02:00 twice, an hour apart."""
    step = HOUR if expression.startswith("0 ") else HOUR / 2
    found = ticks(expression, FALL_BACK)
    assert found == every(step, FALL_BACK)
    assert utc("10-25", "00:00") in found and utc("10-25", "01:00") in found


def test_fall_back_second_pass_neighbours() -> None:
    schedule = Schedule("30 2 * * *")
    assert in_utc(schedule.next_tick(utc("10-25", "00:30"))) == utc("10-26", "01:30")
    assert in_utc(schedule.previous_tick(utc("10-25", "01:45"))) == utc("10-25", "00:30")
    assert schedule.candidates(utc("10-25", "01:30"), 60) == []
    # An aware local time in the second pass is read with its fold, not as wall clock.
    second = datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=BERLIN)
    assert in_utc(schedule.next_tick(second)) == utc("10-26", "01:30")
    assert in_utc(schedule.previous_tick(second)) == utc("10-25", "00:30")


@pytest.mark.parametrize(
    ("expression", "at", "expected"),
    [
        ("30 2 * * *", utc("10-25", "01:30"), utc("10-25", "00:30")),  # 02:30 CET, again
        ("30 2 * * *", utc("10-25", "01:29", 10), utc("10-25", "00:30")),  # 50 s early
        ("30 2 * * *", utc("10-25", "01:28"), None),  # 2 min early: too far
        ("0 2 * * *", utc("10-25", "00:59", 30), utc("10-25", "00:00")),  # 30 s before 02:00 CET
        ("0 2 * * *", utc("10-25", "01:00", 20), utc("10-25", "00:00")),
        ("30 1 * * *", utc("10-25", "00:30"), None),  # 01:30 is not repeated
        ("0 * * * *", utc("10-25", "01:00", 20), utc("10-25", "01:00")),  # a tick of its own
    ],
)
def test_nearest_tick_maps_a_repeated_time_onto_its_first_occurrence(
    expression: str, at: datetime, expected: datetime | None
) -> None:
    assert in_utc(Schedule(expression).nearest_tick(at, 60)) == expected


# -- spring forward: a skipped local time runs once, at the first instant after the gap --------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("30 2 * * *", [utc("03-29", "01:00")]),  # 03:00 CEST stands in for 02:30
        ("0 2 * * *", [utc("03-29", "01:00")]),  # 03:00 CEST stands in for 02:00
        ("30 1 * * *", [utc("03-29", "00:30")]),  # before the change: unaffected
        ("*/15 2 * * *", [utc("03-29", "01:00")]),  # four skipped times, one tick
        ("0 2,3 * * *", [utc("03-29", "01:00")]),  # 02:00's stand-in is 03:00 itself
    ],
)
def test_spring_forward_wall_clock_schedule_runs_a_skipped_time_once(
    expression: str, expected: list[datetime]
) -> None:
    assert ticks(expression, SPRING_FORWARD) == expected


@pytest.mark.parametrize("expression", ["0 * * * *", "*/30 * * * *"])
def test_spring_forward_hourly_and_more_often_get_no_extra_runs(expression: str) -> None:
    """One tick per real hour (or half hour); the missing 02:xx is not made up."""
    step = HOUR if expression.startswith("0 ") else HOUR / 2
    assert ticks(expression, SPRING_FORWARD) == every(step, SPRING_FORWARD)


def test_spring_forward_stand_in_is_found_from_either_side() -> None:
    schedule = Schedule("30 2 * * *")
    assert in_utc(schedule.next_tick(utc("03-28", "23:00"))) == utc("03-29", "01:00")
    assert in_utc(schedule.previous_tick(utc("03-29", "01:00"))) == utc("03-29", "01:00")
    assert in_utc(schedule.next_tick(utc("03-29", "01:00"))) == utc("03-30", "00:30")
    assert in_utc(schedule.nearest_tick(utc("03-29", "01:00", 30), 60)) == utc("03-29", "01:00")


@pytest.mark.parametrize(
    ("expression", "real_time"),
    [
        ("* * * * *", True),
        ("*/15 * * * *", True),
        ("0 * * * *", True),
        ("@hourly", True),
        ("0 0-23 * * *", True),
        ("30 2 * * *", False),
        ("*/15 2 * * *", False),
        ("0 */2 * * *", False),
        ("@daily", False),
    ],
)
def test_real_time_means_the_hour_field_names_every_hour(expression: str, real_time: bool) -> None:
    assert Schedule(expression).real_time is real_time


# -- end to end: job.run(now=...) on real PostgreSQL -------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_fall_back_daily_job_runs_once_through_job_run() -> None:
    """Before: both 02:30s ran (00:30Z and 01:30Z), each as a tick of its own."""

    @locked_task(name="dst_daily_fall", schedule="30 2 * * *")
    def dst_daily_fall() -> None:
        Marker.objects.create(job="dst_daily_fall", pid=os.getpid())

    first = dst_daily_fall.run(now=utc("10-25", "00:30"))  # 02:30 CEST
    assert first.status == RunStatus.SUCCEEDED and first.tick == utc("10-25", "00:30")
    second = dst_daily_fall.run(now=utc("10-25", "01:30"))  # 02:30 CET
    assert second.status == RunStatus.SKIPPED_TICK and second.tick == first.tick
    assert Marker.objects.filter(job="dst_daily_fall").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_fall_back_django_q_delivery_at_the_repeated_time_skips() -> None:
    """django-q2 (croniter) delivers 02:30 twice; the second delivery finds the tick taken.

    ``run_scheduled`` judges lateness by the database clock, so this uses the next fall-back
    night after it rather than 2026's.
    """
    q2 = pytest.importorskip("django_advisory_cron.contrib.django_q")

    @locked_task(name="dst_daily_q2", schedule="30 2 * * *")
    def dst_daily_q2() -> None:
        Marker.objects.create(job="dst_daily_q2", pid=os.getpid())

    night = date(q2.database_now("default").year + 1, 10, 31)
    night -= timedelta(days=(night.weekday() - 6) % 7)  # the last Sunday of October
    first = datetime(night.year, night.month, night.day, 0, 30, tzinfo=UTC)
    second = first + HOUR
    assert first.astimezone(BERLIN).time() == second.astimezone(BERLIN).time()  # both 02:30

    ran = q2.run_scheduled("dst_daily_q2", intended=first.isoformat())
    again = q2.run_scheduled("dst_daily_q2", intended=second.isoformat())
    assert [run["status"] for run in ran["runs"]] == ["succeeded"]
    assert again["runs"] == [
        {"tick": ran["runs"][0]["tick"], "status": "skipped_tick", "run_id": None}
    ]
    assert Marker.objects.filter(job="dst_daily_q2").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_spring_forward_daily_job_runs_once_at_three() -> None:
    @locked_task(name="dst_daily_spring", schedule="30 2 * * *")
    def dst_daily_spring() -> None:
        Marker.objects.create(job="dst_daily_spring", pid=os.getpid())

    stand_in = dst_daily_spring.run(now=utc("03-29", "01:00"))  # 03:00 CEST
    late = dst_daily_spring.run(now=utc("03-29", "01:00", 40))
    assert stand_in.status == RunStatus.SUCCEEDED and stand_in.tick == utc("03-29", "01:00")
    assert late.status == RunStatus.SKIPPED_TICK and late.tick == stand_in.tick
    assert Marker.objects.filter(job="dst_daily_spring").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_fall_back_hourly_job_runs_in_both_passes() -> None:
    @locked_task(name="dst_hourly", schedule="0 * * * *")
    def dst_hourly() -> None:
        Marker.objects.create(job="dst_hourly", pid=os.getpid())

    summer = dst_hourly.run(now=utc("10-25", "00:00"))  # 02:00 CEST
    winter = dst_hourly.run(now=utc("10-25", "01:00"))  # 02:00 CET
    assert summer.status == winter.status == RunStatus.SUCCEEDED
    assert [summer.tick, winter.tick] == [utc("10-25", "00:00"), utc("10-25", "01:00")]
    assert JobRun.objects.filter(job="dst_hourly", status=RunStatus.SUCCEEDED).count() == 2
