"""Schedules that can never fire (30 February) are refused where they are declared; ``every=``
refuses NaN and infinities the way it refuses 0 (``manage.py check``, ``runlocked`` and
``cronworker``: tests/test_schedule_never_fires.py)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from django_advisory_cron import locked_task, registry
from django_advisory_cron.core.schedule import Schedule
from django_advisory_cron.exceptions import InvalidSchedule
from django_advisory_cron.jobs.job import Job

UTC = timezone.utc


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    "expression",
    [
        "0 0 30 2 *",
        "0 0 31 2 *",
        "0 0 30,31 2 *",
        "0 0 31 4 *",
        "0 0 31 4,6,9,11 *",
        "0 0 31 4,6,9,11 * 30",
        "0 0 30 2 * 15",
        "0 0 31 2,4 ?",
    ],
)
def test_the_decorator_refuses_a_schedule_that_never_fires(expression: str) -> None:
    with pytest.raises(InvalidSchedule) as raised:
        locked_task(name="never_fires", schedule=expression)(lambda: None)
    message = str(raised.value)
    print(message)
    assert "\n" not in message
    assert "'never_fires'" in message and f"{expression!r} never fires" in message
    assert "30 February" in message  # says what is wrong, and what to write instead
    assert "never_fires" not in registry


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # Day 30 OR a Monday (cron's rule when both day fields are restricted): every Monday in
        # February, never a 30th.
        ("0 0 30 2 1", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 3, tzinfo=UTC)),
        ("0 0 30 2 1", datetime(2025, 2, 24, tzinfo=UTC), datetime(2026, 2, 2, tzinfo=UTC)),
        ("0 0 31 2 1-5", datetime(2025, 2, 28, tzinfo=UTC), datetime(2026, 2, 2, tzinfo=UTC)),
        # 29 February: eight years apart around 2100, which is no leap year.
        ("0 0 29 2 *", datetime(2097, 1, 1, tzinfo=UTC), datetime(2104, 2, 29, tzinfo=UTC)),
        # Day 31 is fine as long as one of the months has it.
        ("0 0 31 2,3 *", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 3, 31, tzinfo=UTC)),
        ("0 0 L 2 *", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 28, tzinfo=UTC)),
    ],
)
def test_rare_schedules_are_not_never(expression: str, after: datetime, expected: datetime) -> None:
    job = locked_task(name="rare", schedule=expression)(lambda: None)
    assert job.schedule is not None
    assert job.schedule.next_tick(after) == expected
    assert job.schedule.previous_tick(expected) == expected


def test_a_failure_to_find_a_tick_later_is_an_invalid_schedule() -> None:
    schedule = Schedule("0 0 1 1 *")
    schedule.expression = "0 0 30 2 *"  # as if changed after it was checked
    for method in (schedule.next_tick, schedule.previous_tick):
        with pytest.raises(InvalidSchedule, match=r"'0 0 30 2 \*' has no tick") as raised:
            method(datetime(2025, 1, 1, tzinfo=UTC))
        assert "\n" not in str(raised.value) and "failed to find" not in str(raised.value)


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("every", [math.nan, math.inf, -math.inf, -1, 0, 0.0, 1e-9])
def test_every_must_be_a_positive_finite_duration(every: float) -> None:
    with pytest.raises(InvalidSchedule) as raised:
        locked_task(name="bad_every", every=every)(lambda: None)
    message = str(raised.value)
    print(message)
    assert "'bad_every'" in message and "every must be a positive duration" in message
    assert "\n" not in message and "convert" not in message
    assert "bad_every" not in registry
    with pytest.raises(InvalidSchedule, match="every must be a positive duration"):
        Job(func=lambda: None, name="bad_every", every=every)  # type: ignore[arg-type]


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("every", [True, "5", timedelta(seconds=-1)])
def test_every_of_the_wrong_kind(every: Any) -> None:
    with pytest.raises(InvalidSchedule, match=r"'bad_every'.*every must be"):
        locked_task(name="bad_every", every=every)(lambda: None)


def test_reboot_is_valid_cron_with_no_ticks_and_says_what_to_use() -> None:
    with pytest.raises(InvalidSchedule) as raised:
        Schedule("@reboot")
    message = str(raised.value)
    print(message)
    assert "'@reboot' runs when cron starts, at no time of day" in message
    assert "manage.py runlocked" in message and "\n" not in message


@pytest.mark.usefixtures("fresh_registry")
def test_reboot_is_refused_where_the_job_is_declared() -> None:
    with pytest.raises(InvalidSchedule) as raised:
        locked_task(name="at_boot", schedule="@reboot")(lambda: None)
    message = str(raised.value)
    print(message)
    assert message.startswith("@locked_task 'at_boot': '@reboot' runs when cron starts")
    assert "\n" not in message
    assert "at_boot" not in registry
