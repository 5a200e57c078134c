"""``manage.py cronjob next JOB``: a job's next ticks before they come, in its schedule's zone,
with the changes of that zone's UTC offset and the ticks a pause will skip marked; as a table
and as JSON. Real subprocesses against the test database (whose clock the listing starts
from)."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.core.schedule import Schedule

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def cli_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "cli_tasks"}))


def listed(manage: Any, *args: str) -> dict[str, Any]:
    done = manage("cronjob", "next", *args, "--json")
    assert done.returncode == exitcodes.OK, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_a_years_daily_ticks_in_paris_mark_the_two_clock_changes(manage: Any) -> None:
    """370 daily ticks at 02:30 in Paris hold both changes of its offset, each marked once,
    and each tick is the schedule's own (02:30 does not exist on the spring day: 03:00)."""
    before = timezone.now()
    document = listed(manage, "cli_paris", "-n", "370")
    assert (document["job"], document["zone"], document["schedule"]) == (
        "cli_paris",
        "Europe/Paris",
        "30 2 * * *",
    )
    ticks = document["ticks"]
    assert len(ticks) == 370
    changes = [tick["offset_change"] for tick in ticks if tick["offset_change"]]
    assert sorted(changes) == ["UTC+01:00 -> UTC+02:00", "UTC+02:00 -> UTC+01:00"], changes
    schedule = Schedule("30 2 * * *", zone="Europe/Paris")
    expected = schedule.next_tick(before)
    first = datetime.fromisoformat(ticks[0]["tick"])
    assert first in (expected, schedule.next_tick(expected))  # a tick may pass meanwhile
    for earlier, later in itertools.pairwise(ticks):
        assert datetime.fromisoformat(later["tick"]) == schedule.next_tick(
            datetime.fromisoformat(earlier["tick"])
        )
    assert all(tick["skipped"] is None for tick in ticks)


def test_a_pause_marks_the_ticks_it_will_skip_and_no_later_one(manage: Any) -> None:
    paused = manage("cronjob", "pause", "cli_every", "--until", "7m", "--reason", "relay down")
    assert paused.returncode == exitcodes.OK, paused.stderr
    ticks = listed(manage, "cli_every", "-n", "6")["ticks"]
    skipped = [tick for tick in ticks if tick["skipped"]]
    # Two-minute ticks: three or four of them fall within the next seven minutes.
    assert 3 <= len(skipped) <= 4, ticks
    assert ticks[: len(skipped)] == skipped  # the first ones, then none
    assert all(tick["skipped"].startswith("paused until ") for tick in skipped)
    table = manage("cronjob", "next", "cli_every", "-n", "6")
    assert table.returncode == exitcodes.OK, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == "cli_every: every 2m"
    assert lines[1].split() == [
        "TICK",
        f"({timezone.get_current_timezone_name()})",
        "UTC",
        "OFFSET",
        "NOTE",
    ]
    assert len(lines) == 8 and sum("skipped: paused until" in line for line in lines) == len(
        skipped
    )


def test_the_default_is_ten_ticks_an_hour_apart(manage: Any) -> None:
    ticks = listed(manage, "cli_hourly")["ticks"]
    instants = [datetime.fromisoformat(tick["tick"]) for tick in ticks]
    assert len(instants) == 10
    assert {later - earlier for earlier, later in itertools.pairwise(instants)} == {
        timedelta(hours=1)
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cli_broken"], "job 'cli_broken' has no schedule: it runs when called"),
        (["cli_parsi"], "cli_paris"),
        (["cli_paris", "-n", "0"], "-n: must be a whole number from 1 to 1000, not '0'"),
        (["cli_paris", "-n", "1001"], "from 1 to 1000"),
    ],
)
def test_what_it_cannot_list_is_one_line_and_exit_2(
    manage: Any, args: list[str], says: str
) -> None:
    done = manage("cronjob", "next", *args)
    assert done.returncode == exitcodes.USAGE, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
