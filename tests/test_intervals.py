"""Sub-minute and interval schedules (six-field cron and ``every=``) running jobs; their ticks
alone: tests/unit/test_intervals.py."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops.status import JobStatus
from tests.jobsapp.models import Marker
from tests.unit.test_intervals import at

# --- checks and displays -------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("fresh_registry")
def test_runlocked_list_and_status_show_intervals() -> None:
    job = locked_task(name="every_five_listed", every=5)(lambda: None)
    out = io.StringIO()
    call_command("runlocked", "--list", stdout=out)
    line = next(line for line in out.getvalue().splitlines() if "every_five_listed" in line)
    assert "every 5s" in line
    status = JobStatus(job=job, now=at(3))
    assert status.as_dict()["schedule"] == "every 5s"
    assert status.schedule_description == "every 5s"  # real time: no zone in brackets
    assert status.next_tick == at(5)


# --- end to end, on PostgreSQL -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_with_the_default_max_skew_a_sub_minute_run_takes_its_nearest_tick() -> None:
    """docs/once-per-tick.md: with the default ``MAX_SKEW`` (60 s) an every-5-s job's run takes
    the tick nearest to it, never one more than half the interval (2.5 s) away."""
    job = locked_task(name="every_five_default_skew", every=5)(lambda: None)
    assert job.run(now=at(2.4)).tick == at(0)
    assert job.run(now=at(2.6)).tick == at(5)
    assert job.run(now=at(10)).tick == at(10)  # cronworker's run, at its tick


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@override_settings(ADVISORY_CRON={"MAX_SKEW": 0.5})
def test_interval_job_runs_once_per_tick() -> None:
    @locked_task(name="every_two_seconds", every=2)
    def every_two_seconds() -> str:
        Marker.objects.create(job="every_two_seconds", pid=0)
        return "ran"

    first = every_two_seconds.run(now=at(0.3))
    second = every_two_seconds.run(now=at(0.3))
    assert first.status == RunStatus.SUCCEEDED and first.tick == at(0)
    assert second.status == RunStatus.SKIPPED_TICK and second.tick == at(0)
    assert second.skipped_tick
    following = every_two_seconds.run(now=at(2.3))
    assert following.status == RunStatus.SUCCEEDED and following.tick == at(2)
    # Between ticks, beyond MAX_SKEW of both: an unscheduled run (guarded by the lock only).
    between = every_two_seconds.run(now=at(3))
    assert between.status == RunStatus.SUCCEEDED and between.tick is None
    assert Marker.objects.filter(job="every_two_seconds").count() == 3
    statuses = JobRun.objects.filter(job="every_two_seconds").values_list("tick", "status")
    assert sorted(statuses, key=lambda row: (row[0] is None, row)) == [
        (at(0), "succeeded"),
        (at(2), "succeeded"),
        (None, "succeeded"),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@override_settings(ADVISORY_CRON={"MAX_SKEW": 0.5})
def test_six_field_job_runs_once_per_tick() -> None:
    @locked_task(name="cron_two_seconds", schedule="* * * * * */2")
    def cron_two_seconds() -> None:
        Marker.objects.create(job="cron_two_seconds", pid=0)

    assert cron_two_seconds.run(now=at(-0.2)).tick == at(0)
    assert cron_two_seconds.run(now=at(0.3)).status == RunStatus.SKIPPED_TICK
    assert cron_two_seconds.run(now=at(2.1)).status == RunStatus.SUCCEEDED
    assert Marker.objects.filter(job="cron_two_seconds").count() == 2
