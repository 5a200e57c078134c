"""Schedules kept in the database, run by real ``cronworker`` processes (3) against a real
PostgreSQL: added, edited mid-run, paused and resumed, disabled, removed while running, and
picked up behind a real PgBouncer without LISTEN. Each tick runs once, none is invented."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from django_advisory_cron.models import JobRun, RunStatus, Schedule
from django_advisory_cron.run import control
from django_advisory_cron.testing import PgBouncer
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, workers_present

from .pooling import bouncer_url
from .test_pause import wait_for_workers

pytestmark = [pytest.mark.usefixtures("transactional_db"), pytest.mark.slow]

WORKERS = 3


@pytest.fixture
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks", "MAX_SKEW": 0.5})
    )


@pytest.fixture
def fleet(schedule_jobs: None, spawn: Any, raw_connect: Any) -> list[Any]:
    """Three workers running every job, the database's schedules included."""
    workers = [spawn("cronworker", "--grace", "10") for _ in range(WORKERS)]
    wait_for_workers(raw_connect(), workers)
    return workers


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.terminate()
    return [worker.communicate(timeout=30)[1] for worker in workers]


def runs(name: str) -> list[JobRun]:
    return list(JobRun.objects.filter(job=name).order_by("tick"))


def ran(name: str, count: int) -> bool:
    return JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).count() >= count


def assert_once_per_tick(name: str, label: str | None = None) -> list[JobRun]:
    """Every run row has its own tick, and the body ran once per run that ran."""
    rows = runs(name)
    ticks = Counter(run.tick for run in rows)
    assert all(count == 1 for count in ticks.values()), ticks
    ran_rows = [run for run in rows if run.status != RunStatus.SKIPPED_LOCKED]
    assert Marker.objects.filter(job=label or name).count() == len(ran_rows)
    return rows


def on_grid(tick: datetime, seconds: float) -> bool:
    return tick.timestamp() % seconds == 0


def test_an_added_schedule_runs_once_per_tick_from_its_next_tick(fleet: list[Any]) -> None:
    added = Schedule.objects.create(
        name="added", job="mark", kwargs={"label": "added"}, every=2, changed_by="test"
    )
    added.refresh_from_db()
    try:
        wait_for(lambda: ran("added", 4), timeout=30)
    finally:
        errors = stop(fleet)
        print(errors[0][-3000:])
    rows = assert_once_per_tick("added")
    assert rows[0].tick > added.changed
    assert rows[0].tick - added.changed <= timedelta(seconds=2)
    assert all(on_grid(run.tick, 2) for run in rows)
    # Consecutive ticks, none missed, none twice.
    assert all(b.tick - a.tick == timedelta(seconds=2) for a, b in zip(rows, rows[1:]))
    latency = (rows[0].started - added.changed).total_seconds()
    print(f"\nadded -> first run started: {latency:.3f} s (first tick {rows[0].tick})")
    assert sum("job added scheduled: every 2s" in err for err in errors) == WORKERS, errors
