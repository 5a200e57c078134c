"""``cronjob backfill JOB --start T1 [--end T2] [--dry-run]`` (issue 38, item 4), in real
subprocesses on a real server: the ticks of the range that have no run run here, oldest first,
each once, also with two backfills of one range at once beside a running ``cronworker``; each
run is recorded with its tick and marked as a backfill; a failed run, a stop signal and bad
input end as the action's help says."""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.core.schedule import Every
from django_advisory_cron.models import TICK_TAKING, JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.test_cronjob_schedules import refused
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def backfill_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "backfill_tasks", "HEARTBEAT": 0.5})
    )


def hour_now(raw_connect: Any) -> datetime:
    """The database's clock, at the start of its hour."""
    now: datetime = raw_connect().execute("SELECT now()").fetchone()[0]
    return now.replace(minute=0, second=0, microsecond=0)


def ok(result: Any) -> str:
    """What a backfill that ended well printed (each run's start and end are logged to
    stderr, as the job's logging says)."""
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def taken(job: str) -> Counter[datetime]:
    """How many runs that take a tick each tick of ``job`` has."""
    rows = JobRun.objects.filter(job=job, status__in=TICK_TAKING, tick__isnull=False)
    return Counter(tick for tick in rows.values_list("tick", flat=True) if tick is not None)


def test_the_ticks_without_a_run_run_oldest_first_marked_as_a_backfill(
    manage: Any, raw_connect: Any
) -> None:
    hour = hour_now(raw_connect)
    ticks = [hour - timedelta(hours=n) for n in (5, 4, 3, 2, 1)]
    had_run = JobRun.objects.create(
        job="backfill_hourly", tick=ticks[2], host="web-1", pid=1, started=ticks[2],
        finished=ticks[2] + timedelta(seconds=1), status=RunStatus.SUCCEEDED,
    )  # fmt: skip
    JobRun.objects.create(
        job="backfill_hourly",
        tick=ticks[3],
        host="web-1",
        pid=1,
        started=ticks[3],
        finished=ticks[3],
        status=RunStatus.SKIPPED_PAUSED,
    )  # fmt: skip: a skip is no run: its tick is backfilled
    start, end = ticks[0].isoformat(), (ticks[-1] + timedelta(minutes=30)).isoformat()
    pending = [ticks[n] for n in (0, 1, 3, 4)]

    dry = ok(manage("cronjob", "backfill", "backfill_hourly", "--start", start, "--end", end,
                    "--dry-run"))  # fmt: skip
    assert dry.splitlines() == [
        f"backfill_hourly: 5 ticks from {start} to {end}, 4 without a run (dry run: nothing runs)",
        *(f"  would run tick {tick.isoformat()}" for tick in pending),
    ]
    assert not Marker.objects.exists()

    done = ok(manage("cronjob", "backfill", "backfill_hourly", "--start", start, "--end", end))
    lines = done.splitlines()
    assert lines[0] == f"backfill_hourly: 5 ticks from {start} to {end}, 4 without a run"
    assert [line.split(" tick ")[0] for line in lines[1:5]] == [
        "[#####---------------] 1/4",
        "[##########----------] 2/4",
        "[###############-----] 3/4",
        "[####################] 4/4",
    ]
    assert all(
        f"tick {tick.isoformat()}:" in line for tick, line in zip(pending, lines[1:5], strict=True)
    )
    assert (
        lines[5]
        == "backfill_hourly: backfill done: 4 ran here, 0 had run elsewhere or were skipped"
    )
    runs = list(JobRun.objects.filter(job="backfill_hourly", backfill=True).order_by("started"))
    assert [run.tick for run in runs] == pending  # oldest first, each with its tick
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED}
    assert Marker.objects.filter(job="backfill_hourly").count() == 4
    assert not JobRun.objects.get(pk=had_run.pk).backfill

    history = json.loads(
        ok(manage("cronjob", "history", "backfill_hourly", "--limit", "1", "--json"))
    )
    assert history[0]["backfill"] is True
    assert "(backfill)" in ok(manage("cronjob", "history", "backfill_hourly", "--limit", "1"))

    again = ok(manage("cronjob", "backfill", "backfill_hourly", "--start", start, "--end", end))
    assert again.splitlines()[0].endswith("0 without a run")
    assert Marker.objects.filter(job="backfill_hourly").count() == 4


@pytest.mark.slow
def test_two_backfills_of_one_range_beside_a_worker_run_each_tick_once(
    spawn: Any, raw_connect: Any
) -> None:
    """Each backfill waits for the job's lock while another run holds it, then finds the
    tick taken or takes it: no tick is left by both, none runs twice."""
    observer = raw_connect()
    worker = spawn("cronworker", "backfill_every_second")
    wait_for_workers(observer, [worker])
    backfills = [
        spawn("cronjob", "backfill", "backfill_every_second", "--start", "12s") for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in backfills]
    assert [process.returncode for process in backfills] == [0, 0], outputs
    worker.send_signal(signal.SIGTERM)
    worker.communicate(timeout=60)

    runs = taken("backfill_every_second")
    assert runs and max(runs.values()) == 1, runs  # each tick once
    succeeded = JobRun.objects.filter(job="backfill_every_second", status=RunStatus.SUCCEEDED)
    assert Marker.objects.filter(job="backfill_every_second").count() == succeeded.count()
    # Every tick of the range up to the second backfill's start has run, whoever ran it.
    first_line = outputs[1][0].splitlines()[0]
    start = datetime.fromisoformat(first_line.split(" from ")[1].split(" to ")[0])
    end = datetime.fromisoformat(first_line.split(" to ")[1].split(",")[0])
    expected = list(Every(timedelta(seconds=1)).ticks_between(start, end))
    assert all(tick in runs for tick in expected), sorted(set(expected) - set(runs))
    assert JobRun.objects.filter(job="backfill_every_second", backfill=True).exists()


def test_a_failed_run_is_recorded_and_the_others_go_on(manage: Any, raw_connect: Any) -> None:
    hour = hour_now(raw_connect)
    start, end = (hour - timedelta(hours=2)).isoformat(), (hour - timedelta(minutes=30)).isoformat()
    done = manage("cronjob", "backfill", "backfill_failing", "--start", start, "--end", end)
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    assert done.stdout.count("failed") >= 2
    assert [run.status for run in JobRun.objects.filter(job="backfill_failing")] == [
        RunStatus.FAILED
    ] * 2


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_backfill_recording_the_run_it_stopped(
    spawn: Any, raw_connect: Any, stop: signal.Signals
) -> None:
    hour = hour_now(raw_connect)
    start = (hour - timedelta(hours=3)).isoformat()
    backfill = spawn("cronjob", "backfill", "backfill_slow", "--start", start)
    wait_for(lambda: Marker.objects.filter(job="backfill_slow").exists(), timeout=60)
    backfill.send_signal(stop)
    stdout, stderr = backfill.communicate(timeout=60)
    code = exitcodes.SIGTERM if stop == signal.SIGTERM else exitcodes.SIGINT
    assert backfill.returncode == code, (stdout, stderr)
    assert "backfill_slow: backfill stopped at tick " in stderr, stderr
    [run] = JobRun.objects.filter(job="backfill_slow")  # the later ticks did not run
    assert (run.tick, run.status, run.backfill) == (
        hour - timedelta(hours=3),
        RunStatus.INTERRUPTED,
        True,
    )


def test_bad_input_is_refused_in_one_line(manage: Any) -> None:
    def backfill(*args: str) -> str:
        return refused(manage("cronjob", "backfill", *args))

    assert "no job named 'nope'" in backfill("nope", "--start", "1d")
    assert backfill("backfill_hourly", "--start", "last tuesday") == (
        "cronjob: --start: 'last tuesday' is neither a duration (90s, 30m, 2h, 1d, 1h30m) nor an "
        "ISO 8601 date-time (2026-12-24T08:00, 2026-12-24T08:00+01:00)"
    )
    assert "is outside 0001-01-02 to 9999-12-30 (UTC)" in backfill(
        "backfill_hourly", "--start", "99999999d"
    )
    assert " is before --start " in backfill("backfill_hourly", "--start", "1h", "--end", "2h")
    assert backfill("backfill_unscheduled", "--start", "1d") == (
        "cronjob: backfill backfill_unscheduled: the job has no schedule, so no ticks to run"
    )
    assert backfill("backfill_every_second", "--start", "1d") == (
        "cronjob: backfill backfill_every_second: the range holds more than 10,000 ticks; split it "
        "into shorter ranges (--start, --end)"
    )
    assert not JobRun.objects.exists()
