"""``cronstatus`` (real subprocesses, real exit codes) and ``prune_jobruns``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from subprocess import CompletedProcess
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.utils import timezone

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.management.commands.prune_jobruns import prune
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops.status import job_statuses
from tests.jobsapp.tasks import failing, quick_scheduled
from tests.waiting import wait_for

Manage = Callable[..., CompletedProcess[str]]


def add_run(job: str, status: RunStatus, age: timedelta, **extra: Any) -> JobRun:
    started = timezone.now() - age
    return JobRun.objects.create(
        job=job, host="h", pid=1, started=started, finished=started, status=status, **extra
    )


def test_healthy_when_nothing_ran_yet(manage: Manage) -> None:
    result = manage("cronstatus")
    assert result.returncode == exitcodes.OK, result.stderr
    assert "healthy" in result.stdout
    document = json.loads(manage("cronstatus", "--json").stdout)
    assert document["healthy"] is True
    names = {job["job"] for job in document["jobs"]}
    assert {"quick_scheduled", "failing", "sleepy"} <= names
    quick = next(job for job in document["jobs"] if job["job"] == "quick_scheduled")
    assert quick["never_ran"] is True and quick["next_tick"] is not None
    assert quick["schedule_description"].startswith("Every 5 minutes")


def test_failing_job_is_unhealthy(manage: Manage) -> None:
    with pytest.raises(RuntimeError):
        failing()
    result = manage("cronstatus", "--json")
    assert result.returncode == exitcodes.UNHEALTHY
    document = json.loads(result.stdout)
    assert document["unhealthy"] == ["failing"]
    job = next(job for job in document["jobs"] if job["job"] == "failing")
    assert job["failing"] is True
    assert job["last_run"]["status"] == "failed"
    text = manage("cronstatus")
    assert text.returncode == exitcodes.UNHEALTHY
    assert "failing: FAILING" in text.stdout
    ignored = manage("cronstatus", "--ignore", "failing")
    assert ignored.returncode == exitcodes.OK
    only_quick = manage("cronstatus", "--job", "quick_scheduled")
    assert only_quick.returncode == exitcodes.OK


def test_overdue_scheduled_job(manage: Manage) -> None:
    # Every 5 minutes; the last success was an hour ago.
    add_run("quick_scheduled", RunStatus.SUCCEEDED, timedelta(hours=1))
    result = manage("cronstatus", "--json", "--job", "quick_scheduled")
    assert result.returncode == exitcodes.UNHEALTHY
    job = json.loads(result.stdout)["jobs"][0]
    assert job["overdue"] is True and job["problems"] == ["overdue"]
    # A run just now puts it right.
    quick_scheduled.run()
    assert manage("cronstatus", "--job", "quick_scheduled").returncode == exitcodes.OK


def test_stuck_job_with_a_stale_lock(
    raw_connect: Callable[..., psycopg.Connection[Any]], fresh_registry: None
) -> None:
    @locked_task(name="status.stuck", max_runtime=1)
    def stuck() -> None:
        pass

    holder = raw_connect()
    holder.execute(f"SELECT pg_advisory_lock({stuck.key.sql})", stuck.key.params)
    (status,) = job_statuses(["status.stuck"])
    assert status.holder is not None and not status.stuck
    assert f"backend pid {holder.info.backend_pid}" in status.held_by
    wait_for(lambda: job_statuses(["status.stuck"])[0].stuck, timeout=10)  # held over 1 s
    out = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("cronstatus", "--job", "status.stuck", stdout=out)
    assert exit_info.value.code == exitcodes.UNHEALTHY
    assert "status.stuck: STUCK" in out.getvalue()


def test_unknown_job_and_unreachable_database(manage: Manage) -> None:
    unknown = manage("cronstatus", "--job", "no_such_job")
    assert unknown.returncode == exitcodes.USAGE
    assert "no_such_job" in unknown.stderr
    down = manage("cronstatus", url="postgresql://postgres@127.0.0.1:1/nothing")
    assert down.returncode == exitcodes.DATABASE_UNAVAILABLE, down.stderr
    assert "cannot reach PostgreSQL" in down.stderr


def test_prune_deletes_old_rows_in_batches(db_url: str) -> None:
    for day in range(5):
        add_run("prune.job", RunStatus.FAILED, timedelta(days=100 + day))
    keep_success = add_run("prune.job", RunStatus.SUCCEEDED, timedelta(days=120))
    older_success = add_run("prune.job", RunStatus.SUCCEEDED, timedelta(days=130))
    running = add_run("prune.job", RunStatus.RUNNING, timedelta(days=140))
    recent = add_run("prune.job", RunStatus.FAILED, timedelta(days=1))
    other = add_run("prune.other", RunStatus.SKIPPED_LOCKED, timedelta(days=200))
    assert prune(90, batch_size=2, dry_run=True) == 7
    assert JobRun.objects.count() == 10
    assert prune(90, batch_size=2, job="prune.other") == 1
    assert prune(90, batch_size=2) == 6
    left = set(JobRun.objects.values_list("id", flat=True))
    assert left == {keep_success.id, running.id, recent.id}
    assert older_success.id not in left and other.id not in left


def test_prune_command(manage: Manage) -> None:
    add_run("prune.job", RunStatus.FAILED, timedelta(days=100))
    add_run("prune.job", RunStatus.FAILED, timedelta(days=10))
    assert manage("prune_jobruns", "--dry-run").stdout.strip() == (
        "would delete 1 run(s) older than 90 day(s)"
    )
    assert manage("prune_jobruns", "--days", "5").stdout.strip() == (
        "deleted 2 run(s) older than 5 day(s)"
    )
    assert not JobRun.objects.exists()
    assert manage("prune_jobruns", "--days", "0").returncode != 0
