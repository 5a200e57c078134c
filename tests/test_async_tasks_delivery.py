"""``async def`` jobs delivered through the Tasks framework (``deliver="tasks"``): the task
that runs the tick awaits the job's body, whose async ORM writes land, once per tick, in real
``cronworker``, ``db_worker`` and ``runlocked --enqueue`` processes."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.test_tasks_delivery import SETTINGS, _drained, tasks_db  # noqa: F401
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.mark.slow
def test_an_async_job_runs_in_the_task_worker_once_per_tick(
    tasks_db: str,  # noqa: F811
    spawn: Any,
    raw_connect: Any,
) -> None:
    worker = spawn("db_worker", SETTINGS, "--no-startup-delay", "--interval", "0.1")
    schedulers = [spawn("cronworker", "tasks_async", SETTINGS, "--grace", "5") for _ in range(2)]
    wait_for_workers(raw_connect(), schedulers)
    wait_for(lambda: JobRun.objects.filter(job="tasks_async", status="succeeded").count() >= 2)
    for scheduler in schedulers:
        scheduler.send_signal(signal.SIGTERM)
    for scheduler in schedulers:
        _out, err = scheduler.communicate(timeout=30)
        assert scheduler.returncode == exitcodes.SIGTERM, err
    wait_for(lambda: _drained(tasks_db))
    worker.send_signal(signal.SIGTERM)

    claims = {claim.tick: claim for claim in EnqueuedTick.objects.filter(job="tasks_async")}
    assert None not in claims
    runs = list(JobRun.objects.filter(job="tasks_async"))
    assert Counter(run.tick for run in runs) == Counter(dict.fromkeys(claims, 1))
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED}
    assert {run.task_id for run in runs} == {claim.task_id for claim in claims.values()}
    markers = Marker.objects.filter(job="tasks_async")
    assert markers.count() == len(runs)
    assert {marker.pid for marker in markers} == {worker.pid}  # written in the task worker


@pytest.mark.slow
def test_runlocked_enqueue_awaits_an_async_job_in_the_immediate_backend(
    tasks_db: str,  # noqa: F811
    manage: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = {"JOBS_MODULE": "tasks_delivery", "MAX_SKEW": 30}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    second = time.time() % 60
    if 25 < second < 35:  # not astride the boundary between two ticks' tolerances
        time.sleep(36 - second)
    done = manage("runlocked", SETTINGS, "--enqueue", "tasks_async_minutely")
    assert done.returncode == exitcodes.OK, done.stderr
    (claim,) = EnqueuedTick.objects.filter(job="tasks_async_minutely")
    (run,) = JobRun.objects.filter(job="tasks_async_minutely")
    assert run.status == RunStatus.SUCCEEDED and run.task_id == claim.task_id
    (marker,) = Marker.objects.filter(job="tasks_async_minutely")
    assert marker.pid == run.pid == claim.pid  # awaited inside the enqueuing process
