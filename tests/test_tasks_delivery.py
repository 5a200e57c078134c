"""Cron for Django's Tasks framework: ``deliver="tasks"`` enqueues each tick once, runs it once.

The database backend runs in real processes: ``cronworker`` schedulers and django-tasks-db
``db_worker`` task workers, started with ``tests.settings_tasks`` against the test database.
The ImmediateBackend runs inside ``runlocked --enqueue`` (real processes) and in this process
(``tests.settings`` has no ``TASKS``, so the framework's default, an ImmediateBackend, applies).
"""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.core import checks

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.contrib.tasks import enqueue
from django_advisory_cron.contrib.tasks.checks import check_deliveries
from django_advisory_cron.contrib.tasks.task import tick_task
from django_advisory_cron.delivery.targets import DeliveryError
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

SETTINGS = "--settings=tests.settings_tasks"
RESULTS = "django_tasks_database_dbtaskresult"

_migrated: set[str] = set()


def _sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def tasks_db(db_url: str, manage: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test database with django-tasks-db's table, emptied before and after; the
    subprocesses load the jobs of ``tests/jobsapp/tasks_delivery.py``."""
    settings = {"JOBS_MODULE": "tasks_delivery", "MAX_SKEW": 0.9}  # below half of 2 s ticks
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    if db_url not in _migrated:
        done = manage("migrate", "django_tasks_database", "-v0", "--skip-checks", SETTINGS)
        assert done.returncode == 0, done.stderr
        _migrated.add(db_url)
    _sql(db_url, f"TRUNCATE {RESULTS}")
    yield db_url
    _sql(db_url, f"TRUNCATE {RESULTS}")


def _results(url: str) -> list[tuple[str, str, list[Any]]]:
    """``(id, status, args)`` of every task result of the database backend."""
    rows = _sql(url, f"SELECT id::text, status, args_kwargs FROM {RESULTS} ORDER BY enqueued_at")
    return [(task_id, status, args_kwargs["args"]) for task_id, status, args_kwargs in rows]


def _drained(url: str) -> bool:
    return not _sql(url, f"SELECT 1 FROM {RESULTS} WHERE status IN ('READY', 'RUNNING')")


@pytest.mark.slow
def test_three_schedulers_and_two_db_workers_run_each_tick_once(
    tasks_db: str, spawn: Any, manage: Any, raw_connect: Any
) -> None:
    jobs = ["tasks_every2", "tasks_failing"]
    workers = [
        spawn("db_worker", SETTINGS, "--no-startup-delay", "--interval", "0.1") for _ in range(2)
    ]
    schedulers = [spawn("cronworker", *jobs, SETTINGS, "--grace", "5") for _ in range(3)]
    wait_for_workers(raw_connect(), schedulers)
    # Three ticks: the later ones come while all three schedulers are up.
    wait_for(lambda: EnqueuedTick.objects.filter(job="tasks_every2").count() >= 3)
    for scheduler in schedulers:
        scheduler.send_signal(signal.SIGTERM)
    for scheduler in schedulers:
        _out, err = scheduler.communicate(timeout=30)
        assert scheduler.returncode == exitcodes.SIGTERM, err
    wait_for(lambda: _drained(tasks_db))

    claims: dict[tuple[str, datetime | None], EnqueuedTick]
    claims = {(c.job, c.tick): c for c in EnqueuedTick.objects.all()}
    results = _results(tasks_db)
    # One enqueue per (job, tick) across the three schedulers: the claim let one through.
    assert len(results) == len(claims)
    assert {task_id for task_id, _status, _args in results} == {
        claim.task_id for claim in claims.values()
    }
    runs = JobRun.objects.filter(job__in=jobs)
    # Each enqueued tick ran exactly once, in a task worker, under its task's id.
    per_tick = Counter((run.job, run.tick) for run in runs)
    assert per_tick == Counter(dict.fromkeys(claims, 1)), per_tick
    for run in runs:
        assert run.task_id == claims[(run.job, run.tick)].task_id
    succeeded = runs.filter(job="tasks_every2")
    assert {run.status for run in succeeded} == {RunStatus.SUCCEEDED}
    assert Marker.objects.filter(job="tasks_every2").count() == succeeded.count()
    ticks = sorted(run.tick for run in succeeded if run.tick)
    assert all((b - a) == timedelta(seconds=2) for a, b in itertools.pairwise(ticks))
    failed = runs.filter(job="tasks_failing")
    assert {run.status for run in failed} == {RunStatus.FAILED}
    assert Counter(status for _id, status, _args in results) == Counter(
        {"SUCCESSFUL": succeeded.count(), "FAILED": failed.count()}
    )
    delays = [(run.started - run.tick).total_seconds() for run in succeeded if run.tick]
    print(  # the numbers the docs quote; visible with pytest -s
        f"tick -> job start through django-tasks-db (db_worker --interval 0.1): "
        f"median {statistics.median(delays):.3f}s, max {max(delays):.3f}s, n={len(delays)}"
    )
    assert max(delays) < 5

    # The backend's retry: django-tasks-db has none of its own, so enqueue the failed task's
    # arguments again, as a retry (or an operator) would. The tick is taken: the retry's task
    # ends without running the job, and writes no row.
    failed_run = failed.first()
    assert failed_run is not None
    retried_args = next(args for task_id, _s, args in results if task_id == failed_run.task_id)
    retry = manage(
        "shell",
        SETTINGS,
        "-c",
        "from django_advisory_cron.contrib.tasks.task import tick_task; "
        f"print(tick_task().using(backend='default').enqueue(*{retried_args!r}).id)",
    )
    assert retry.returncode == 0, retry.stderr
    retry_id = retry.stdout.strip().splitlines()[-1]  # after the shell's own banner
    wait_for(lambda: retry_id in {task_id for task_id, _s, _args in _results(tasks_db)})
    wait_for(lambda: _drained(tasks_db))
    assert not JobRun.objects.filter(task_id=retry_id).exists()
    assert JobRun.objects.filter(job="tasks_failing", tick=failed_run.tick).count() == 1
    assert Marker.objects.filter(job="tasks_failing").count() == failed.count()
    for worker in workers:
        worker.send_signal(signal.SIGTERM)


@pytest.mark.slow
def test_runlocked_enqueue_to_the_immediate_backend_runs_inline_once(
    tasks_db: str, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A minutely job with a 30 s tolerance: three schedulers started together claim one tick.
    settings = {"JOBS_MODULE": "tasks_delivery", "MAX_SKEW": 30}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    second = time.time() % 60
    if 25 < second < 35:  # not astride the boundary between two ticks' tolerances
        time.sleep(36 - second)
    schedulers = [spawn("runlocked", SETTINGS, "--enqueue", "tasks_minutely") for _ in range(3)]
    outputs = [scheduler.communicate(timeout=60) for scheduler in schedulers]
    assert [scheduler.returncode for scheduler in schedulers] == [0, 0, 0], outputs
    lines = sorted(out.strip() for out, _err in outputs)
    assert sum("not enqueued" in line for line in lines) == 2, lines
    (claim,) = EnqueuedTick.objects.filter(job="tasks_minutely")
    (run,) = JobRun.objects.filter(job="tasks_minutely")
    assert run.status == RunStatus.SUCCEEDED and run.tick == claim.tick
    assert run.task_id == claim.task_id and run.pid == claim.pid  # ran inside the enqueuer
    assert claim.backend == "immediate"
    assert f"as task {claim.task_id}" in "\n".join(lines)
    assert _results(tasks_db) == []  # nothing went through the database backend


def test_a_duplicate_delivery_skips_and_writes_nothing(fresh_registry: None) -> None:
    calls: list[int] = []

    @locked_task(name="immediate_every_minute", schedule="* * * * *", deliver="tasks")
    def immediate_every_minute(number: int) -> None:
        calls.append(number)

    first = enqueue(immediate_every_minute, 7)
    assert first.enqueued and first.tick is not None and calls == [7]
    tick = first.tick
    again = enqueue(immediate_every_minute, 7, tick=tick)
    assert not again.enqueued and calls == [7]  # the claim stopped the second enqueue
    # A delivery that bypasses the claim (a retry, a redelivery) runs into the tick record.
    duplicate = (
        tick_task()
        .using(backend="default")
        .enqueue("immediate_every_minute", tick.isoformat(), [7])
    )
    assert calls == [7]
    runs = {run.task_id: run.status for run in JobRun.objects.filter(job="immediate_every_minute")}
    assert runs == {first.task_id: RunStatus.SUCCEEDED}, duplicate.id


def test_bad_input_is_refused_with_one_clear_line(
    fresh_registry: None, tasks_db: str, manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="deliver must be 'tasks' or 'tasks:<backend alias>'"):
        locked_task(deliver="carrier-pigeon")(print)
    with pytest.raises(ValueError, match="not 'tasks:'"):
        locked_task(deliver="tasks:")(print)

    @locked_task(name="takes_an_object", schedule="* * * * *", deliver="tasks")
    def takes_an_object(value: object) -> None: ...

    with pytest.raises(DeliveryError, match="arguments must be JSON-serialisable"):
        enqueue(takes_an_object, object())
    assert not EnqueuedTick.objects.exists()  # refused before claiming the tick

    @locked_task(name="to_nowhere", schedule="* * * * *", deliver="tasks:nowhere")
    def to_nowhere() -> None: ...

    with pytest.raises(DeliveryError, match="TASKS has no backend 'nowhere'"):
        enqueue(to_nowhere)
    # The settings' "immediate" backend runs tasks in place: a warning beside the error.
    assert [(message.id, message.level) for message in check_deliveries()] == [
        ("django_advisory_cron.W054", checks.WARNING),
        ("django_advisory_cron.E051", checks.ERROR),
    ]

    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "tasks_nowhere"}))
    worker = manage("cronworker", "tasks_nowhere", SETTINGS)
    assert worker.returncode == exitcodes.CONFIG
    assert worker.stderr.strip() == (
        "cronworker: Job 'tasks_nowhere' has deliver='tasks:nowhere', but TASKS has no "
        "backend 'nowhere' (configured: 'default', 'immediate')."
    )
    once = manage("runlocked", SETTINGS, "--enqueue", "tasks_nowhere")
    assert once.returncode == exitcodes.CONFIG and "Traceback" not in once.stderr
    assert "TASKS has no backend 'nowhere'" in once.stderr
    assert not EnqueuedTick.objects.exists()


def test_a_tick_that_already_ran_is_not_enqueued_and_says_so(
    fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A tick run by hand (``runlocked``) is not said to be "enqueued elsewhere"."""
    calls: list[int] = []

    @locked_task(name="ran_by_hand", schedule="* * * * *", deliver="tasks")
    def ran_by_hand(number: int) -> None:
        calls.append(number)

    result = ran_by_hand.run(5)
    assert result.status == RunStatus.SUCCEEDED and result.tick is not None
    with caplog.at_level("INFO", logger="django_advisory_cron"):
        again = enqueue(ran_by_hand, 5, tick=result.tick)
    assert not again.enqueued and again.already_ran and calls == [5]
    assert f"job ran_by_hand: tick {result.tick} already ran" in caplog.text
    assert "enqueued elsewhere" not in caplog.text
