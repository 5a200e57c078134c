"""Sub-minute and interval schedules: six-field cron (the second last) and ``every=``.

Interval ticks are ``EPOCH + n * every``; cron ticks with a seconds field follow the same
daylight saving time rules as five-field ones (see tests/unit/test_schedule.py). The jobs
running on them: tests/test_intervals.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.test import override_settings

from django_advisory_cron import locked_task, registry
from django_advisory_cron.contrib import django_q as q2
from django_advisory_cron.contrib.django_q.checks import check_unsyncable_jobs
from django_advisory_cron.contrib.django_q.schedules import unsyncable
from django_advisory_cron.core.schedule import (
    EPOCH,
    MAX_CANDIDATES,
    Every,
    Schedule,
    describe_interval,
)
from django_advisory_cron.exceptions import InvalidSchedule

UTC = timezone.utc
SECOND = timedelta(seconds=1)
# 2026-03-01 12:00:00Z is a whole multiple of 2 s (and of 5 s, 1 min, 1 h) since the epoch.
TICK = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return TICK + timedelta(seconds=seconds)


def utc(month: int, day: int, hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def walk(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The ticks in ``[start, end]``, forward; walking back with previous_tick must agree."""
    forward = list(schedule.ticks_between(start, end))
    backward, cursor = [], end
    while (tick := schedule.previous_tick(cursor)) >= start:
        backward.append(tick)
        cursor = tick - timedelta(microseconds=1)
    assert backward[::-1] == forward
    return forward


@pytest.fixture
def berlin() -> Iterator[None]:
    with override_settings(TIME_ZONE="Europe/Berlin"):
        yield


# --- six-field cron ------------------------------------------------------------------------


def test_six_fields_put_the_second_last_as_croniter_does() -> None:
    daily = Schedule("0 2 * * * 30")  # 02:00:30, not 00:02 on the 30th
    assert daily.has_seconds and not daily.real_time
    assert daily.next_tick(utc(1, 10, 0, 0)) == utc(1, 10, 2, 0, 30)
    assert daily.previous_tick(utc(1, 10, 2, 0, 30)) == utc(1, 10, 2, 0, 30)
    assert daily.previous_tick(utc(1, 10, 2, 0, 29)) == utc(1, 9, 2, 0, 30)
    # croniter's second_at_beginning=True order is not used: "30 0 2 * * *" is minute 30,
    # hour 0, the 2nd of the month, second "*".
    assert Schedule("30 0 2 * * *").next_tick(utc(1, 10, 0, 0)) == utc(2, 2, 0, 30, 0)
    assert not Schedule("0 2 * * *").has_seconds


def test_seven_fields_and_bad_seconds_are_refused() -> None:
    with pytest.raises(InvalidSchedule, match="has 7 fields; use five"):
        Schedule("0 0 * * * * *")
    with pytest.raises(InvalidSchedule, match="not a valid cron expression"):
        Schedule("0 0 * * * 60")


def test_every_two_seconds_as_cron_ticks_on_even_seconds() -> None:
    schedule = Schedule("* * * * * */2")
    assert schedule.real_time and schedule.min_interval == 2 * SECOND
    assert walk(schedule, at(-3), at(3)) == [at(-2), at(0), at(2)]
    assert schedule.next_tick(at(0)) == at(2) and schedule.previous_tick(at(0)) == at(0)
    assert schedule.next_tick(at(0.3)) == at(2) and schedule.previous_tick(at(1.9)) == at(0)
    # Across a minute boundary, "*/2" of seconds 0-59 keeps its 2-second step.
    assert walk(schedule, at(-61), at(-58)) == [at(-60), at(-58)]


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("* * * * * */2", 2),
        ("* * * * * 0,30", 30),
        ("* * * * * 50", 60),
        ("* * * * *", 60),
        ("*/15 * * * *", 15 * 60),
        ("0,59 23,0 * * *", 60),  # 23:59 then 00:00
        ("0 * * * * 10,50", 40),  # hh:00:10 -> hh:00:50, then 3560 s to (hh+1):00:10
        ("@hourly", 3600),
        ("0 2 * * *", 86400),
    ],
)
def test_min_interval(expression: str, seconds: int) -> None:
    assert Schedule(expression).min_interval == timedelta(seconds=seconds)


def test_six_field_schedules_keep_the_dst_rules(berlin: None) -> None:
    # 25 October 2026: 02:00-02:59 local happens twice (00:00-00:59Z CEST, 01:00-01:59Z CET).
    wall_clock = Schedule("30 2 * * * 15")
    assert walk(wall_clock, utc(10, 24, 21, 0), utc(10, 25, 3, 0)) == [utc(10, 25, 0, 30, 15)]
    # ... and the second occurrence still belongs to that tick.
    assert wall_clock.nearest_tick(utc(10, 25, 1, 30, 20), 10) == utc(10, 25, 0, 30, 15)
    real_time = Schedule("0 * * * * 15")  # every hour at hh:00:15: real-time
    assert real_time.real_time
    assert utc(10, 25, 0, 0, 15) in walk(real_time, utc(10, 24, 23, 0), utc(10, 25, 2, 0))
    assert utc(10, 25, 1, 0, 15) in walk(real_time, utc(10, 24, 23, 0), utc(10, 25, 2, 0))
    # 29 March 2026: 02:00-02:59 local never happens; a skipped wall-clock time ticks at 03:00.
    assert walk(wall_clock, utc(3, 28, 22, 0), utc(3, 29, 3, 0)) == [utc(3, 29, 1, 0)]
    assert walk(real_time, utc(3, 29, 0, 30), utc(3, 29, 1, 30)) == [utc(3, 29, 1, 0, 15)]


def test_dense_candidates_are_the_ones_nearest_the_reference_time() -> None:
    """Every 2 s, the five-minute margin holds ~300 ticks: the 64 nearest are kept, so the
    ticks that can match are never crowded out by the start of the window."""
    schedule = Schedule("* * * * * */2")
    candidates = schedule.candidates(at(0.3), max_skew=1)
    assert candidates == [at(-62 + 2 * n) for n in range(MAX_CANDIDATES)]  # to at(64)
    assert schedule.matches(at(0.3), 1) == [(tick, tick) for tick in candidates]
    assert schedule.nearest_tick(at(0.3), 1) == at(0)


def test_sparse_candidates_are_unchanged() -> None:
    """Every minute: the whole window of MAX_SKEW plus five minutes, as before."""
    schedule = Schedule("* * * * *")
    candidates = schedule.candidates(at(0), max_skew=60)
    assert candidates == [at(60 * minute) for minute in range(-6, 7)]


def test_dense_wall_clock_schedule_matches_the_repeated_second_pass(berlin: None) -> None:
    """Every 2 s during 02:xx local (wall-clock): at 02:30:00.3 CET, the second pass, the
    nearest first-pass tick is still found among far more than 64 in the window."""
    schedule = Schedule("* 2 * * * */2")
    assert not schedule.real_time
    second_pass = utc(10, 25, 1, 30) + timedelta(seconds=0.3)
    pairs = schedule.matches(second_pass, 1)
    assert (utc(10, 25, 1, 30), utc(10, 25, 0, 30)) in pairs
    assert schedule.nearest_tick(second_pass, 1) == utc(10, 25, 0, 30)


# --- interval schedules --------------------------------------------------------------------


def test_interval_ticks_are_aligned_to_the_epoch() -> None:
    every = Every(timedelta(seconds=7))
    assert every.real_time and every.expression == "every 7s"
    tick = every.next_tick(TICK)
    assert (tick - EPOCH) % every.interval == timedelta(0)
    assert TICK < tick <= TICK + every.interval
    assert tick == EPOCH + ((TICK - EPOCH) // (7 * SECOND) + 1) * 7 * SECOND
    # A number is seconds; the same interval gives the same ticks, from any starting point.
    assert Every(7).next_tick(TICK) == tick
    assert Every(7).previous_tick(tick + 3 * SECOND) == tick
    # An hour-long interval ticks on the UTC hour, whatever TIME_ZONE says.
    with override_settings(TIME_ZONE="Asia/Kolkata"):
        assert Every(timedelta(hours=1)).next_tick(at(1)) == at(3600)


def test_interval_next_and_previous_at_exact_ticks() -> None:
    every = Every(2)
    assert every.previous_tick(at(0)) == at(0)
    assert every.next_tick(at(0)) == at(2)
    assert every.previous_tick(at(0) - timedelta(microseconds=1)) == at(-2)
    assert every.next_tick(at(2) - timedelta(microseconds=1)) == at(2)
    assert walk(every, at(-4), at(4)) == [at(-4), at(-2), at(0), at(2), at(4)]
    # Aware datetimes in any zone work; ticks come back in UTC.
    local = at(0.5).astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert every.previous_tick(local) == at(0) and every.previous_tick(local).tzinfo is UTC


def test_interval_candidates_and_matches_two_seconds_max_skew_one() -> None:
    every = Every(2)
    candidates = every.candidates(at(0.3), max_skew=1)
    assert len(candidates) == MAX_CANDIDATES
    assert candidates[0] == at(-62) and candidates[-1] == at(64)
    assert every.matches(at(0.3), 1) == [(tick, tick) for tick in candidates]
    assert every.nearest_tick(at(0.3), 1) == at(0)
    assert every.nearest_tick(at(1.7), 1) == at(2)
    assert every.nearest_tick(at(1), 1) == at(0)  # equidistant: the earlier tick
    assert every.nearest_tick(at(0.3), 0.2) is None
    # Sparse intervals keep the whole window.
    assert Every(timedelta(minutes=1)).candidates(at(0), 60) == [
        at(60 * minute) for minute in range(-6, 7)
    ]


def test_intervals_ignore_daylight_saving_time(berlin: None) -> None:
    every = Every(timedelta(minutes=30))
    # 25 October: the local hour 02:xx happens twice; an interval just keeps real time.
    assert walk(every, utc(10, 24, 23, 0), utc(10, 25, 2, 0)) == [
        utc(10, 24, 23, 0) + timedelta(minutes=30 * n) for n in range(7)
    ]
    # ... with no second-pass matches (an interval is real-time).
    assert every.matches(utc(10, 25, 1, 30), 10) == [
        (tick, tick) for tick in every.candidates(utc(10, 25, 1, 30), 10)
    ]
    # 29 March: the skipped local hour changes nothing either.
    assert walk(every, utc(3, 29, 0, 0), utc(3, 29, 2, 0)) == [
        utc(3, 29, 0, 0) + timedelta(minutes=30 * n) for n in range(5)
    ]


@pytest.mark.parametrize(
    ("every", "text"),
    [
        (5, "every 5s"),
        (timedelta(seconds=90), "every 1m30s"),
        (0.5, "every 0.5s"),
        (timedelta(hours=2), "every 2h"),
        (timedelta(days=1, seconds=1), "every 1d1s"),
    ],
)
def test_interval_text(every: timedelta | float, text: str) -> None:
    assert Every(every).expression == text
    assert describe_interval(Every(every).interval) == text


def test_interval_repr() -> None:
    assert repr(Every(5)) == "Every(5)" and repr(Every(0.25)) == "Every(0.25)"


# --- the decorator -------------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_registry")
def test_every_takes_a_timedelta_or_seconds() -> None:
    @locked_task(name="every_five", every=timedelta(seconds=5))
    def every_five() -> None: ...

    @locked_task(name="every_half", every=0.5)
    def every_half() -> None: ...

    assert every_five.every == timedelta(seconds=5) and every_five.cron is None
    assert every_half.every == timedelta(milliseconds=500)
    assert isinstance(every_five.schedule, Every)
    assert every_five.schedule.next_tick(at(3)) == at(5)
    assert every_five.schedule_text == "every 5s" and every_half.schedule_text == "every 0.5s"


@pytest.mark.usefixtures("fresh_registry")
def test_schedule_text_of_cron_and_unscheduled_jobs() -> None:
    @locked_task(name="nightly", schedule="0 2 * * *")
    def nightly() -> None: ...

    @locked_task(name="whenever")
    def whenever() -> None: ...

    @locked_task(name="bad_cron", schedule="61 * * * *")
    def bad_cron() -> None: ...

    assert nightly.schedule_text == "0 2 * * *" and whenever.schedule_text is None
    assert bad_cron.schedule_text == "61 * * * *"  # shown as written, never raises


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule": "* * * * *", "every": 5}, "mutually exclusive"),
        ({"every": 0}, "every must be a positive duration"),
        ({"every": -1.5}, "every must be a positive duration"),
        ({"every": timedelta(0)}, "every must be a positive duration"),
        ({"every": "5"}, "timedelta or a number of seconds"),
        ({"every": True}, "timedelta or a number of seconds"),
    ],
)
def test_decorator_validates_every(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        locked_task(name="invalid_every", **kwargs)(lambda: None)
    assert "invalid_every" not in registry


# --- checks and displays -------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_registry")
def test_django_q_skips_interval_and_seconds_schedules() -> None:
    interval = locked_task(name="q2_interval", every=timedelta(minutes=5))(lambda: None)
    seconds = locked_task(name="q2_seconds", schedule="0 2 * * * 30")(lambda: None)
    five = locked_task(name="q2_five", schedule="0 2 * * *")(lambda: None)
    assert unsyncable(interval) == "an interval schedule (every 5m)"
    assert unsyncable(seconds) == "a cron expression with a seconds field ('0 2 * * * 30')"
    assert unsyncable(five) is None
    synced = {job.name for job in q2.scheduled_jobs()}
    assert "q2_five" in synced and not {"q2_interval", "q2_seconds"} & synced
    warnings = {w.msg: w for w in check_unsyncable_jobs() if "'q2_" in w.msg}
    assert len(warnings) == 2
    for message, warning in warnings.items():
        assert warning.id == "django_advisory_cron.W065"
        assert "cronworker" in (warning.hint or "") and "django-q2 cannot run" in message
