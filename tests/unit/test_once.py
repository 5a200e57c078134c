"""A one-off schedule (``at=``): its single tick, read in a time zone across daylight saving
time, and the moments ``--at`` accepts (each one builds a schedule and reads back the same)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron.core.once import AFTER_LAST, BEFORE_FIRST, LATEST_ONCE, Once, read_moment
from django_advisory_cron.core.schedule import EPOCH
from django_advisory_cron.exceptions import InvalidSchedule
from django_advisory_cron.jobs.catchup import first_missed, plan
from django_advisory_cron.jobs.job import Job

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
MOMENT = datetime(2026, 12, 24, 17, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def test_the_one_tick() -> None:
    once = Once(MOMENT)
    assert once.next_tick(MOMENT - SECOND) == MOMENT
    assert once.next_tick(MOMENT) == AFTER_LAST
    assert once.previous_tick(MOMENT) == MOMENT
    assert once.previous_tick(MOMENT - SECOND) == BEFORE_FIRST
    assert once.previous_tick(MOMENT + timedelta(days=400)) == MOMENT
    assert list(once.ticks_between(MOMENT - timedelta(days=1), MOMENT + timedelta(days=1))) == [
        MOMENT
    ]
    assert once.last == MOMENT


def test_a_run_near_it_belongs_to_it() -> None:
    once = Once(MOMENT)
    assert once.nearest_tick(MOMENT + 3 * SECOND, 60) == MOMENT
    assert once.nearest_tick(MOMENT - 3 * SECOND, 60) == MOMENT
    assert once.nearest_tick(MOMENT + timedelta(minutes=2), 60) is None
    assert once.matches(MOMENT, 60) == [(MOMENT, MOMENT)]


def test_read_in_its_zone() -> None:
    assert read_moment("2026-12-24 18:00", "Europe/Berlin") == MOMENT
    assert read_moment("2026-12-24 18:00:30", "Europe/Berlin") == MOMENT + 30 * SECOND
    assert read_moment("2026-12-24T18:00+01:00") == MOMENT
    assert read_moment(datetime(2026, 12, 24, 18), "Europe/Berlin") == MOMENT
    with override_settings(TIME_ZONE="America/New_York"):
        assert read_moment("2026-12-24 12:00") == MOMENT


def test_an_offset_wins_over_the_zone() -> None:
    assert read_moment("2026-12-24T17:00+00:00", "Europe/Berlin") == MOMENT


def test_daylight_saving_time() -> None:
    # 02:30 on 29 March 2026 does not happen in Berlin: the first instant after the gap.
    assert read_moment("2026-03-29 02:30", "Europe/Berlin") == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )
    # 02:30 on 25 October 2026 happens twice: the first time (CEST).
    assert read_moment("2026-10-25 02:30", "Europe/Berlin") == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )


def test_describe_in_its_zone() -> None:
    assert Once(MOMENT, "Europe/Berlin").describe() == "once at 2026-12-24 18:00 (Europe/Berlin)"
    assert Once(MOMENT + 5 * SECOND).describe() == "once at 2026-12-24 17:00:05 (UTC)"


@pytest.mark.parametrize(
    "text",
    ["", "tomorrow", "2026-12-24", "2026-13-01 10:00", "2026-12-24 25:00", "1969-12-31 23:00",
     "9999-06-01 10:00", "0001-01-01 00:00"],
)  # fmt: skip
def test_bad_moments_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        read_moment(text, "UTC")
    assert "\n" not in str(refused.value) and (
        "at must" in str(refused.value) or "moment" in str(refused.value)
    )


def test_bad_zone_is_refused() -> None:
    with pytest.raises(InvalidSchedule, match="not a known time zone"):
        read_moment("2026-12-24 18:00", "Mars/Olympus")


ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                         "Pacific/Kiritimati", "Pacific/Pago_Pago"])  # fmt: skip


@given(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 30)),
    ZONES,
    st.booleans(),
)
def test_whatever_at_accepts_builds_and_stores(wall: datetime, zone: str, seconds: bool) -> None:
    """The text ``--at`` accepts becomes a UTC moment within what the database stores, whose
    schedule has that one tick; read again (as the database gives it back) it is the same."""
    text = wall.isoformat(sep=" ", timespec="seconds" if seconds else "minutes")
    moment = read_moment(text, zone)
    assert moment.tzinfo is not None and EPOCH <= moment < LATEST_ONCE
    once = Once(moment, zone)
    assert once.next_tick(moment - SECOND) == moment
    assert once.previous_tick(moment) == moment
    assert read_moment(moment) == moment
    assert once.describe().startswith("once at ")


@given(st.text(max_size=30), ZONES)
def test_any_text_is_read_or_refused_in_one_line(text: str, zone: str) -> None:
    try:
        moment = read_moment(text, zone)
    except InvalidSchedule as refused:
        said = str(refused)
    else:
        said = ""
        assert EPOCH <= moment < LATEST_ONCE
    assert "\n" not in said


def _one_off(**options: Any) -> Job[..., Any]:
    return Job(func=print, name="one_off", at=MOMENT, **options)


def test_a_one_off_that_never_ran_is_missed_once_its_moment_passed() -> None:
    """A job that never ran has missed nothing, but a one-off: its moment is its only tick."""
    assert first_missed(_one_off(), None, MOMENT - SECOND) is None
    assert first_missed(_one_off(), None, MOMENT + SECOND) == MOMENT
    # Added after its moment: nothing from before its schedule's change is caught up.
    assert first_missed(_one_off(edited=MOMENT + SECOND), None, MOMENT + 2 * SECOND) is None
    # Recorded (it ran, or was skipped): nothing more.
    assert first_missed(_one_off(), MOMENT, MOMENT + timedelta(days=1)) is None


@pytest.mark.parametrize(
    ("options", "runs"),
    [({"catch_up": "latest"}, [MOMENT]), ({"catch_up": "all"}, [MOMENT]),
     ({"catch_up": "none"}, []), ({"catch_up": "latest", "max_lateness": 1.0}, [])],
)  # fmt: skip
def test_a_missed_one_off_follows_its_catch_up(options: dict[str, Any], runs: list[Any]) -> None:
    decided = plan(_one_off(**options), MOMENT, MOMENT + 5 * SECOND, on_time=False)
    assert decided.run == runs and decided.missed == [MOMENT]


def test_a_job_s_final_tick() -> None:
    assert _one_off().final == MOMENT
    assert _one_off(ends=MOMENT - SECOND).final == MOMENT - SECOND
    assert Job(func=print, name="forever", every=timedelta(seconds=5)).final is None
    with pytest.raises(InvalidSchedule, match="a schedule has one of"):
        Job(func=print, name="both", at=MOMENT, every=timedelta(seconds=5))
