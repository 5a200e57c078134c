"""What ``cronworker`` says, in real processes against a real PostgreSQL: a run without a
tick (run now) is named so, never ``tick None``."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun
from tests.jobsapp.models import Marker
from tests.test_worker_edges import Lines
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def worker_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def test_a_run_now_is_said_as_such_never_tick_none(
    worker_jobs: None, spawn: Any, manage: Any, raw_connect: Any
) -> None:
    # One slot, taken by a run now busy for 3 s: a second run now waits for it.
    worker = spawn("cronworker", "yearly_busy", "yearly_manual", "--max-concurrency", "1")
    log = Lines(worker)
    wait_for_workers(raw_connect(), [worker])
    for job in ("yearly_busy", "yearly_manual"):
        triggered = manage("cronjob", "trigger", job)
        assert triggered.returncode == exitcodes.OK, triggered.stderr
        wait_for(lambda: JobRun.objects.filter(job="yearly_busy").exists(), timeout=30)
    wait_for(lambda: Marker.objects.filter(job="yearly_manual").exists(), timeout=30)
    worker.send_signal(signal.SIGTERM)
    said = log.finish() + worker.stdout.read()
    assert "yearly_manual (run now) waited" in said, said
    assert "None" not in said, said
    by_hand = manage("runlocked", "--manual", "yearly_manual")
    assert by_hand.returncode == exitcodes.OK, by_hand.stderr
    assert "None" not in by_hand.stdout + by_hand.stderr
