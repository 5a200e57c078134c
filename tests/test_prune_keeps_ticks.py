"""Pruning the history never runs a tick again.

``prune_jobruns`` must keep what the once-per-tick and catch-up rules read: each job's latest
recorded tick (``latest_recorded_ticks``: the greatest tick among the rows that take a tick,
and the tick of the latest row that has one), and every row whose lease has not expired (its
body may still be running). A weekly job whose latest tick failed days ago is the case that
went wrong: its failed row was pruned, and the next ``cronworker`` caught that tick up and ran
it a second time. Real ``manage.py prune_jobruns`` and ``cronworker`` processes.
"""

from __future__ import annotations

import json
import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from django_advisory_cron import exitcodes
from django_advisory_cron.core.schedule import Schedule
from django_advisory_cron.jobs.catchup import recorded_ticks
from django_advisory_cron.models import JobRun, RunStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

SECOND = timedelta(seconds=1)
WEEK = timedelta(days=7)


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now: datetime = cursor.fetchone()[0]
    return now


def weekly_three_days_ago(now: datetime) -> str:
    """A weekly cron expression whose latest tick is two to four days before ``now``."""
    day = (now - timedelta(days=3)).weekday()  # Monday 0; cron's Sunday is 0
    return f"0 3 * * {(day + 1) % 7}"


def row(job: str, tick: datetime | None, status: str, **fields: Any) -> JobRun:
    started = fields.pop("started", (tick or datetime.now().astimezone()) + SECOND)
    finished = fields.pop("finished", started + SECOND)
    return JobRun.objects.create(
        job=job,
        tick=tick,
        host="earlier",
        pid=1,
        started=started,
        finished=finished,
        status=status,
        **fields,
    )


def test_a_pruned_history_does_not_make_cronworker_run_a_failed_tick_again(
    manage: Any, spawn: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A weekly job: a success two weeks ago, another last week, and its latest tick (days
    ago) failed. ``prune_jobruns --days 1`` deletes the older success only; a ``cronworker``
    started next finds nothing missed: the failed tick is not run again."""
    log = tmp_path / "bodies.log"
    log.touch()
    now = db_now()
    expression = weekly_three_days_ago(now)
    schedule = Schedule(expression)
    latest = schedule.previous_tick(now)
    before = schedule.previous_tick(latest - SECOND)
    assert timedelta(days=1) < now - latest < WEEK
    row("weekly_report", before - WEEK, RunStatus.SUCCEEDED)
    kept_success = row("weekly_report", before, RunStatus.SUCCEEDED)
    failed = row("weekly_report", latest, RunStatus.FAILED, error="Traceback: boom")

    pruned = manage("prune_jobruns", "--days", "1")
    assert pruned.returncode == 0, pruned.stderr
    print(pruned.stdout.strip())
    left = set(JobRun.objects.values_list("id", flat=True))

    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "lease_tasks", "MAX_SKEW": 1})
    )
    monkeypatch.setenv("LEASE_TASKS_LOG", str(log))
    monkeypatch.setenv("LEASE_TASKS_WEEKLY", expression)
    worker = spawn("cronworker", "weekly_report", "lease_companion_0", "--grace", "5")
    # Past its start-up (when it catches ticks up): it has run a later tick of another job.
    companion = JobRun.objects.filter(job="lease_companion_0", status=RunStatus.SUCCEEDED)
    wait_for(lambda: companion.count() >= 2, 40, interval=0.1)
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    runs = list(JobRun.objects.filter(job="weekly_report").values_list("tick", "status"))
    print(f"weekly_report rows after the worker: {runs}")
    assert "weekly_report" not in log.read_text(), log.read_text()
    assert "missed tick" not in err, err
    assert sorted(runs) == [(before, RunStatus.SUCCEEDED), (latest, RunStatus.FAILED)]
    assert "deleted 1 run(s)" in pruned.stdout
    assert left == {kept_success.id, failed.id}


def test_pruning_keeps_what_catch_up_reads_and_the_runs_still_leased() -> None:
    """The latest recorded tick of each job is the same before and after pruning, whichever
    row it comes from: the greatest tick among the rows that take one (a failure), or the
    latest row with a tick (a skip for a later tick while the job was paused). A row whose
    lease has not expired (a ``lock_lost`` run whose body may still run) is kept however old."""
    now = db_now()
    old = now - timedelta(days=30)
    # Job a: its latest tick is a failure, older rows go.
    row("a", old - 2 * WEEK, RunStatus.SUCCEEDED)
    row("a", old - WEEK, RunStatus.SKIPPED_TICK)
    a_failed = row("a", old, RunStatus.FAILED)
    a_success = row("a", old - 3 * WEEK, RunStatus.SUCCEEDED, started=old - 2 * WEEK + 2 * SECOND)
    # Job b: a success, then its later ticks skipped while paused; the latest skip is its
    # latest recorded tick, and it is also the latest row with a tick.
    b_success = row("b", old - WEEK, RunStatus.SUCCEEDED)
    row("b", old - WEEK / 2, RunStatus.SKIPPED_PAUSED)
    b_paused = row("b", old, RunStatus.SKIPPED_PAUSED)
    # Job c: an unscheduled run whose lock was lost long ago, its body still going.
    c_lost = row(
        "c",
        None,
        RunStatus.LOCK_LOST,
        started=old,
        finished=None,
        lease_until=now + timedelta(minutes=5),
    )
    jobs = ["a", "b", "c"]
    reads = recorded_ticks(connection, jobs)
    assert reads == {"a": old, "b": old}

    call_command("prune_jobruns", "--days", "1", verbosity=0)

    assert recorded_ticks(connection, jobs) == reads
    assert set(JobRun.objects.values_list("id", flat=True)) == {
        a_failed.id,
        a_success.id,
        b_success.id,
        b_paused.id,
        c_lost.id,
    }
