"""``deliver="tasks"`` with a backend that runs the task inside the enqueue (Django's
ImmediateBackend, the default without a ``TASKS`` setting): nothing is queued, the tick runs
in the scheduler itself, and its run is recorded as it ended, at once."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def immediate_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "immediate_tasks", "MAX_SKEW": 0.9}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def _finished() -> list[JobRun]:
    runs = JobRun.objects.filter(job="immediate_every2", status=RunStatus.SUCCEEDED)
    return list(runs.filter(finished__isnull=False).order_by("tick"))


@pytest.mark.slow
def test_cronworker_records_a_tick_run_by_the_immediate_backend_as_it_ended(
    immediate_jobs: None, spawn: Any
) -> None:
    worker = spawn("cronworker", "immediate_every2", "--grace", "5")
    # While the worker runs, each tick's row is finished as soon as its task returned.
    wait_for(lambda: Marker.objects.filter(job="immediate_every2").count() >= 2)
    wait_for(lambda: len(_finished()) >= 2, 10)
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    runs = list(JobRun.objects.filter(job="immediate_every2").order_by("tick"))
    assert len(runs) == Marker.objects.filter(job="immediate_every2").count()
    for run in runs:
        assert run.status == RunStatus.SUCCEEDED and run.error == "", (run.status, run.error)
        assert run.finished is not None and run.task_id
        assert (run.finished - run.started).total_seconds() < 2
    assert "recorded as interrupted" not in err


def test_check_warns_that_the_immediate_backend_queues_nothing(
    immediate_jobs: None, manage: Any
) -> None:
    done = manage("check")
    assert done.returncode == 0, done.stderr
    assert "django_advisory_cron.W054" in done.stderr + done.stdout


@pytest.mark.slow
def test_cronworker_a_job_raising_keyboard_interrupt_in_the_immediate_backend_fails(
    immediate_jobs: None, spawn: Any
) -> None:
    worker = spawn("cronworker", "immediate_raises", "--grace", "5")
    wait_for(lambda: JobRun.objects.filter(job="immediate_raises").count() >= 3)
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    runs = list(JobRun.objects.filter(job="immediate_raises"))
    assert len(runs) == Marker.objects.filter(job="immediate_raises").count()
    assert len({run.tick for run in runs}) == len(runs)  # each tick once
    for run in runs:
        assert run.status == RunStatus.FAILED and "KeyboardInterrupt" in run.error
    assert "Traceback" in err and "not enqueued" not in err
    # The enqueue returned (the task recorded as failed), so each claim holds its task's id.
    claims = {claim.tick: claim.task_id for claim in EnqueuedTick.objects.all()}
    assert {run.tick: run.task_id for run in runs} == claims
