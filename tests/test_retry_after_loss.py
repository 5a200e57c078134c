"""A run whose lock is lost during the back-off between two attempts: the back-off wakes on
the loss and no further attempt starts, and the lost run's row keeps the attempts that ran and
what they logged. Under ``cronworker`` (the lock held on the worker's shared connection, the
run in a pool thread) and ``runlocked`` (its own connection, the run in the main thread), with
the lock's connection ended by ``pg_terminate_backend``."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.pglocks import holders
from tests.test_worker_edges import Lines
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

#: Logged once attempt 1 has failed and the back-off (2 to 4 s) has begun.
BACKING_OFF = "attempt 1 of 4 failed (Flaky: attempt 1 of flaky_lost fails); retrying in"


@pytest.fixture(autouse=True)
def retry_jobs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    settings = {"JOBS_MODULE": "retry_tasks", "HEARTBEAT": 0.5, "LEASE": 1.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    return tmp_path / "flaky_lost"


def _cut_during_the_back_off(observer: Any, lines: Lines) -> None:
    """Once attempt 1 has failed, end the connection holding the job's lock."""
    wait_for(lambda: lines.times(BACKING_OFF), timeout=20)
    (pid,) = holders(observer, job_key("flaky_lost"))
    observer.execute("SELECT pg_terminate_backend(%s)", (pid,))


def _lost_run_kept_its_attempt(attempts: Path) -> None:
    run = wait_for(lambda: JobRun.objects.filter(job="flaky_lost", finished__isnull=False).first())
    ran = attempts.read_text().splitlines()
    print(f"attempts run: {len(ran)}; row: {run.status}, attempts={run.attempts}")
    print(f"row error: {run.error.splitlines()[:1]}; row output: {run.output!r}")
    assert len(ran) == 1
    assert (run.status, run.attempts) == (RunStatus.LOCK_LOST, 1)
    assert "attempt 1: Flaky: attempt 1 of flaky_lost fails" in run.error.splitlines(), run.error
    assert "attempt 1 of flaky_lost" in run.output


def test_a_worker_starts_no_attempt_after_its_lock_is_lost(
    spawn: Any, manage: Any, raw_connect: Any, retry_jobs: Path
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "flaky_lost")
    lines = Lines(worker)
    wait_for(lambda: lines.times("listening for run-now requests"))
    triggered = manage("cronjob", "trigger", "flaky_lost")
    assert triggered.returncode == exitcodes.OK, triggered.stderr
    _cut_during_the_back_off(observer, lines)
    _lost_run_kept_its_attempt(retry_jobs)
    worker.send_signal(signal.SIGTERM)
    err = lines.finish()
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "lost before attempt 2; not retried" in err


def test_runlocked_starts_no_attempt_after_its_lock_is_lost(
    spawn: Any, raw_connect: Any, retry_jobs: Path
) -> None:
    observer = raw_connect()
    process = spawn("runlocked", "flaky_lost")
    lines = Lines(process)
    _cut_during_the_back_off(observer, lines)
    err = lines.finish()
    assert process.returncode == exitcodes.LOCK_LOST, err
    _lost_run_kept_its_attempt(retry_jobs)
