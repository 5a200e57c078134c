"""The next ticks as ``cronjob next`` lists them: each in its schedule's zone, a change of the
zone's UTC offset marked on the first tick after it, the ticks a pause will skip marked."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron.core.schedule import Every, Schedule
from django_advisory_cron.models import JobState
from django_advisory_cron.ops import upcoming

UTC = timezone.utc
NEW_YORK = Schedule("0 9 * * 1-5", zone="America/New_York")


def test_the_spring_and_autumn_changes_are_marked_once_each() -> None:
    ticks = upcoming.next_ticks(NEW_YORK, datetime(2027, 1, 4, tzinfo=UTC), 261)
    changed = [
        (f"{tick.local:%Y-%m-%d}", tick.offset_change) for tick in ticks if tick.offset_change
    ]
    assert changed == [
        ("2027-03-15", "UTC-05:00 -> UTC-04:00"),
        ("2027-11-08", "UTC-04:00 -> UTC-05:00"),
    ]
    assert all(tick.local.hour == 9 for tick in ticks)


def test_an_interval_is_listed_in_time_zone_and_never_changes_offset() -> None:
    ticks = upcoming.next_ticks(Every(timedelta(hours=7)), datetime(2027, 3, 1, tzinfo=UTC), 200)
    assert upcoming.zone_of(Every(timedelta(hours=7))) == "UTC"
    assert not any(tick.offset_change for tick in ticks)


def test_a_pause_until_a_time_skips_the_ticks_before_it_only() -> None:
    now = datetime(2027, 1, 4, 12, tzinfo=UTC)
    state = JobState(job="j", paused=True, paused_until=now + timedelta(days=3))
    ticks = upcoming.next_ticks(NEW_YORK, now, 5, state)
    assert [bool(tick.skipped) for tick in ticks] == [True, True, True, False, False]
    assert ticks[0].skipped == "paused until 2027-01-07 12:00:00 UTC"
    forever = upcoming.next_ticks(NEW_YORK, now, 5, JobState(job="j", paused=True))
    assert {tick.skipped for tick in forever} == {"paused"}
    assert not any(t.skipped for t in upcoming.next_ticks(NEW_YORK, now, 5, JobState(job="j")))


def test_at_most_a_thousand_ticks() -> None:
    every = Every(timedelta(seconds=1))
    assert len(upcoming.next_ticks(every, datetime(2027, 1, 1, tzinfo=UTC), 5000)) == upcoming.MOST


@given(
    st.sampled_from(["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1)),
)
def test_each_tick_is_the_one_after_the_last_and_each_change_is_real(
    zone: str, start: datetime
) -> None:
    """Whatever the zone and the start, the list walks the schedule, and a change is marked
    exactly where two successive ticks have different offsets."""
    schedule = Schedule("30 2 * * *", zone=zone)
    now = start.replace(tzinfo=UTC)
    ticks = upcoming.next_ticks(schedule, now, 40)
    at = now
    for tick in ticks:
        # (Compared in UTC: PEP 495 makes == false across zones for a repeated wall time.)
        assert tick.tick == schedule.next_tick(at) == tick.local.astimezone(UTC)
        at = tick.tick
    for earlier, later in itertools.pairwise(ticks):
        moved = earlier.local.utcoffset() != later.local.utcoffset()
        assert bool(later.offset_change) == moved
