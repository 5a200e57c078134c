"""Interval schedules (``every=``): ticks on the epoch's grid, the same on every replica."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.exceptions import InvalidSchedule
from django_advisory_cron.models import RunStatus
from django_advisory_cron.schedule import Every

UTC = timezone.utc
TICK = datetime(2026, 12, 3, 8, 0, 10, tzinfo=UTC)  # a multiple of 5 s since the epoch


def test_ticks_fall_on_the_epochs_grid() -> None:
    every = Every(timedelta(seconds=5))
    assert every.next_tick(TICK) == TICK + timedelta(seconds=5)
    assert every.next_tick(TICK - timedelta(microseconds=1)) == TICK
    assert every.previous_tick(TICK) == TICK
    assert every.previous_tick(TICK + timedelta(seconds=4.9)) == TICK
    assert list(every.ticks_between(TICK, TICK + timedelta(seconds=10))) == [
        TICK,
        TICK + timedelta(seconds=5),
        TICK + timedelta(seconds=10),
    ]
    # The grid does not depend on the time zone or on where a replica starts counting.
    berlin = TICK.astimezone(timezone(timedelta(hours=1)))
    assert every.next_tick(berlin) == every.next_tick(TICK)
    assert Every(timedelta(minutes=7)).previous_tick(TICK).timestamp() % 420 == 0


def test_matching_picks_the_nearest_tick_within_the_skew() -> None:
    every = Every(timedelta(seconds=2))
    near = TICK + timedelta(seconds=0.3)
    assert every.nearest_tick(near, 0.5) == TICK
    assert every.nearest_tick(TICK + timedelta(seconds=1), 0.5) is None
    assert (TICK, TICK) in every.matches(near, 0.5)
    assert every.expression == "every 2s"


def test_bad_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="positive duration"):
        locked_task(every=0)
    with pytest.raises(ValueError, match="positive duration"):
        locked_task(every=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="not both"):
        locked_task(schedule="* * * * *", every=5)
    with pytest.raises(InvalidSchedule, match="positive duration"):
        Every(timedelta(0))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@override_settings(ADVISORY_CRON={"MAX_SKEW": 0.5})
def test_an_interval_job_runs_once_per_tick() -> None:
    calls: list[datetime] = []

    @locked_task(name="every_two", every=2)
    def every_two() -> None:
        calls.append(TICK)

    assert every_two.schedule_text == "every 2s"
    first = every_two.run(now=TICK + timedelta(seconds=0.3))
    late = every_two.run(now=TICK + timedelta(seconds=0.4))
    following = every_two.run(now=TICK + timedelta(seconds=2.1))
    assert (first.status, first.tick) == (RunStatus.SUCCEEDED, TICK)
    assert (late.status, late.tick) == (RunStatus.SKIPPED_TICK, TICK)
    assert (following.status, following.tick) == (RunStatus.SUCCEEDED, TICK + timedelta(seconds=2))
    assert len(calls) == 2
