"""Missed ticks, per job: the ``catch_up`` and ``max_lateness`` options as declared, and the
catch-up plan over the fall-back night (the runs against real history: tests/test_catchup.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import checks

from django_advisory_cron import locked_task, registry
from django_advisory_cron.checks.configuration import check_jobs
from django_advisory_cron.jobs.catchup import plan
from django_advisory_cron.jobs.job import Job

HOUR = timedelta(hours=1)


def nothing() -> None:
    return None


# -- declaring the options -------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"catch_up": "sometimes"}, "catch_up must be one of 'latest', 'all', 'none'"),
        ({"max_lateness": 0}, "max_lateness must be positive, not 0"),
        ({"max_lateness": -5}, "max_lateness must be positive"),
        ({"max_lateness": timedelta(0)}, "max_lateness must be positive"),
        ({"max_lateness": "60"}, "max_lateness must be seconds or a timedelta"),
        ({"max_lateness": True}, "max_lateness must be seconds or a timedelta"),
        ({"late_after": 0}, "the lateness target (late_after) must be a number of seconds from "),
        ({"late_after": timedelta(days=400)}, "to 31622400 (366 days), not 3.456e+07"),
        ({"late_after": "60"}, "the lateness target (late_after) must be a number of seconds, "),
        ({"late_after": True}, "must be a number of seconds, not bool"),
    ],
)
def test_bad_catch_up_options_are_refused_when_the_job_is_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^@locked_task 'nightly': ") as raised:
        locked_task(name="nightly", schedule="0 2 * * *", **options)(nothing)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert "nightly" not in registry


@pytest.mark.usefixtures("fresh_registry")
def test_max_lateness_takes_seconds_or_a_timedelta() -> None:
    minutes = locked_task(name="a", schedule="0 2 * * *", max_lateness=timedelta(minutes=5))
    assert minutes(nothing).max_lateness == 300
    seconds = locked_task(name="b", every=10, catch_up="all", max_lateness=2.5)(nothing)
    assert seconds.max_lateness == 2.5 and seconds.catch_up == "all"


@pytest.mark.usefixtures("fresh_registry")
def test_late_after_takes_seconds_or_a_timedelta_and_skips_nothing() -> None:
    minutes = locked_task(name="a", schedule="0 2 * * *", late_after=timedelta(minutes=5))
    assert (minutes(nothing).late_after, minutes(nothing).max_lateness) == (300, None)
    assert locked_task(name="b", every=10, late_after=0.5)(nothing).late_after == 0.5
    assert locked_task(name="c", every=10)(nothing).late_after is None


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "check_id"),
    [
        ({"catch_up": "sometimes"}, "E021"),
        ({"max_lateness": -1.0}, "E022"),
        ({"late_after": -1.0}, "E024"),
        ({"late_after": "soon"}, "E024"),
        ({"max_lateness": None, "catch_up": None}, None),
    ],
)
def test_options_that_get_past_the_decorator_are_check_errors(
    options: dict[str, Any], check_id: str | None
) -> None:
    registry.register(Job(func=nothing, name="built_by_hand", cron="0 2 * * *", **options))
    messages = check_jobs()
    assert [message.id for message in messages] == (
        [f"django_advisory_cron.{check_id}"] if check_id else []
    )
    assert all(isinstance(message, checks.Error) for message in messages)
    assert all("'built_by_hand'" in message.msg for message in messages)


# -- the same decision, over a daylight saving time change -----------------------------------


@pytest.mark.usefixtures("fresh_registry")
def test_catching_up_over_the_fall_back_night_runs_a_repeated_time_once() -> None:
    """Berlin, 25 October 2026: 02:30 happens twice; missed, it still runs once. An hourly
    (real-time) job missed both 02:00s, and "all" runs both."""
    daily = locked_task(name="berlin_daily", schedule="30 2 * * *", timezone="Europe/Berlin")
    hourly_job = locked_task(
        name="berlin_hourly", schedule="0 * * * *", timezone="Europe/Berlin", catch_up="all"
    )
    first = datetime.fromisoformat("2026-10-25T00:30:00+00:00")  # 02:30 CEST
    now = datetime.fromisoformat("2026-10-25T02:10:00+00:00")  # 03:10 CET
    missed = plan(daily(nothing), first, now, on_time=False)
    assert missed.run == [first] and missed.missed == [first]
    both = plan(hourly_job(nothing), first - timedelta(minutes=30), now, on_time=False)
    assert [tick.isoformat() for tick in both.run] == [
        "2026-10-25T00:00:00+00:00",  # 02:00 CEST
        "2026-10-25T01:00:00+00:00",  # 02:00 CET
        "2026-10-25T02:00:00+00:00",  # 03:00 CET
    ]
