"""Schedules across daylight saving time: a local time runs once, as with Debian's cron.

Europe/Berlin, 2026: the clocks go back on 25 October (03:00 CEST -> 02:00 CET at 01:00Z, so
02:00-02:59 local happens twice) and forward on 29 March (02:00 CET -> 03:00 CEST at 01:00Z,
so 02:00-02:59 local never happens). The jobs run through them: tests/test_schedule.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.test import override_settings

from django_advisory_cron import locked_task, registry
from django_advisory_cron.checks.configuration import check_jobs
from django_advisory_cron.core.schedule import Schedule
from django_advisory_cron.exceptions import InvalidSchedule
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.ops.status import JobStatus

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


# -- a time zone per job ---------------------------------------------------------------------


# New York, 2026: back on 1 November (02:00 EDT -> 01:00 EST at 06:00Z, so 01:00-01:59 local
# happens twice), forward on 8 March (02:00 EST -> 03:00 EDT at 07:00Z: no 02:xx).
NY_FALL_BACK = (utc("11-01", "04:00"), utc("11-01", "10:00"))
NY_SPRING_FORWARD = (utc("03-08", "05:00"), utc("03-08", "09:00"))


def zoned_ticks(expression: str, zone: str, window: tuple[datetime, datetime]) -> list[datetime]:
    return [tick.astimezone(UTC) for tick in Schedule(expression, zone=zone).ticks_between(*window)]


@pytest.mark.parametrize(
    ("expression", "window", "expected"),
    [
        ("30 1 * * *", NY_FALL_BACK, [utc("11-01", "05:30")]),  # 01:30 EDT; not 01:30 EST
        ("0 * * * *", NY_FALL_BACK, [utc("11-01", f"{h:02}:00") for h in range(4, 11)]),
        ("30 2 * * *", NY_SPRING_FORWARD, [utc("03-08", "07:00")]),  # 03:00 EDT stands in
        ("0 * * * *", NY_SPRING_FORWARD, [utc("03-08", f"{h:02}:00") for h in range(5, 10)]),
    ],
)
def test_new_york_follows_the_same_rule_whatever_time_zone_says(
    expression: str, window: tuple[datetime, datetime], expected: list[datetime]
) -> None:
    assert settings.TIME_ZONE == "Europe/Berlin"
    assert zoned_ticks(expression, "America/New_York", window) == expected


@pytest.mark.parametrize("window", [FALL_BACK, SPRING_FORWARD])
@pytest.mark.parametrize("expression", ["30 2 * * *", "*/15 2 * * *"])
def test_a_zone_of_its_own_gives_the_ticks_time_zone_would(
    expression: str, window: tuple[datetime, datetime]
) -> None:
    berlin_by_settings = ticks(expression, window)
    with override_settings(TIME_ZONE="UTC"):
        assert zoned_ticks(expression, "Europe/Berlin", window) == berlin_by_settings
        assert ticks(expression, window) != berlin_by_settings  # UTC itself differs


def test_an_unknown_zone_is_an_invalid_schedule_in_one_line() -> None:
    with pytest.raises(InvalidSchedule) as raised:
        Schedule("0 2 * * *", zone="Mars/Base")
    assert str(raised.value) == (
        "timezone 'Mars/Base' is not a known time zone; use an IANA name such as "
        "'Europe/Berlin' or 'America/New_York'"
    )
    assert repr(Schedule("0 2 * * *", zone="Asia/Tokyo")) == (
        "Schedule('0 2 * * *', zone='Asia/Tokyo')"
    )


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "0 2 * * *", "timezone": "Mars/Base"}, "is not a known time zone"),
        ({"schedule": "0 2 * * *", "timezone": ""}, "is not a known time zone"),
        ({"schedule": "0 2 * * *", "timezone": 1}, "must be a time zone name"),
        ({"every": 60, "timezone": "Europe/Berlin"}, "cannot be combined with every="),
        ({"timezone": "Europe/Berlin"}, "timezone needs a cron schedule="),
    ],
)
def test_a_bad_timezone_is_refused_when_the_job_is_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^@locked_task 'zoned': ") as raised:
        locked_task(name="zoned", **options)(lambda: None)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "check_id"),
    [
        ({"cron": "0 2 * * *", "timezone": "Mars/Base"}, "E020"),
        ({"every": timedelta(seconds=60), "timezone": "Europe/Berlin"}, "E023"),
    ],
)
def test_a_bad_timezone_that_gets_past_the_decorator_is_a_check_error(
    options: dict[str, Any], check_id: str
) -> None:
    registry.register(Job(func=lambda: None, name="zoned_by_hand", **options))
    assert [message.id for message in check_jobs()] == [f"django_advisory_cron.{check_id}"]


@pytest.mark.usefixtures("fresh_registry")
def test_status_computes_ticks_in_the_jobs_zone_and_names_it() -> None:
    new_york = locked_task(name="ny", schedule="30 1 * * *", timezone="America/New_York")
    job = new_york(lambda: None)
    status = JobStatus(job, now=utc("11-01", "04:00"))
    assert in_utc(status.next_tick) == utc("11-01", "05:30")
    assert status.schedule_description == "At 01:30 (America/New_York)"
    assert status.zone == "America/New_York"
    plain = locked_task(name="berlin", schedule="30 1 * * *")(lambda: None)
    berlin = JobStatus(plain, now=utc("11-01", "04:00"))
    assert berlin.schedule_description == "At 01:30 (Europe/Berlin)"
    assert berlin.as_dict()["timezone"] == "Europe/Berlin"


@pytest.mark.usefixtures("fresh_registry")
def test_django_q_does_not_sync_a_job_with_a_zone_of_its_own() -> None:
    schedules = pytest.importorskip("django_advisory_cron.contrib.django_q.schedules")
    own = locked_task(name="q2_ny", schedule="30 1 * * *", timezone="America/New_York")
    same = locked_task(name="q2_berlin", schedule="30 1 * * *", timezone="Europe/Berlin")
    assert schedules.unsyncable(own(lambda: None)) == (
        "a time zone of its own ('America/New_York'; TIME_ZONE is 'Europe/Berlin')"
    )
    assert schedules.unsyncable(same(lambda: None)) is None
