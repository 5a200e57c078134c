"""Jobs run across daylight saving time: a local time runs once, as with Debian's cron (the
ticks alone, and the Berlin 2026 transitions: tests/unit/test_schedule.py)."""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta

import pytest
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.unit.test_schedule import (
    BERLIN,
    HOUR,
    UTC,
    berlin,  # noqa: F401  (autouse: TIME_ZONE is Berlin)
    in_utc,
    utc,
)

# -- fall back: a repeated local time runs once, at its first occurrence ------------------------


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


# -- a time zone per job ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("zone", "expression", "first", "again"),
    [
        # 02:30 CEST, then 02:30 CET: the repeated time runs once.
        ("Europe/Berlin", "30 2 * * *", utc("10-25", "00:30"), utc("10-25", "01:30")),
        # 02:30 does not exist: 03:00 CEST runs once, a late call skips.
        ("Europe/Berlin", "30 2 * * *", utc("03-29", "01:00"), utc("03-29", "01:00", 40)),
        # 01:30 EDT, then 01:30 EST.
        ("America/New_York", "30 1 * * *", utc("11-01", "05:30"), utc("11-01", "06:30")),
        # 02:30 does not exist: 03:00 EDT runs once.
        ("America/New_York", "30 2 * * *", utc("03-08", "07:00"), utc("03-08", "07:00", 40)),
    ],
)
def test_a_job_in_its_own_zone_runs_once_on_transition_days(
    zone: str, expression: str, first: datetime, again: datetime
) -> None:
    name = f"zoned_{first:%m%d}"

    def body() -> None:
        Marker.objects.create(job=name, pid=os.getpid())

    job = locked_task(name=name, schedule=expression, timezone=zone)(body)
    with override_settings(TIME_ZONE="UTC" if zone == "Europe/Berlin" else "Europe/Berlin"):
        ran = job.run(now=first)
        skipped = job.run(now=again)
    assert ran.status == RunStatus.SUCCEEDED and in_utc(ran.tick) == first
    assert skipped.status == RunStatus.SKIPPED_TICK and skipped.tick == ran.tick
    assert Marker.objects.filter(job=name).count() == 1
