"""``manage.py cronworker`` in real processes: every replica schedules, each tick runs once."""

from __future__ import annotations

import itertools
import json
import signal
from typing import Any

import pytest
from django.db.models import Count

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.worker.fleet import run_order
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

JOBS = 10


@pytest.fixture
def worker_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def test_each_worker_tries_its_due_jobs_in_an_order_of_its_own() -> None:
    names = [f"job{n}" for n in range(20)]
    orders = {tuple(run_order(f"host{w}:1", names)) for w in range(3)}
    assert len(orders) == 3
    assert run_order("host0:1", names) == run_order("host0:1", list(reversed(names)))


def test_three_workers_run_every_tick_once_and_share_the_wins(
    worker_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(JOBS)]
    workers = [spawn("cronworker", *names, "--grace", "5") for _ in range(3)]
    wait_for(lambda: workers_present(observer) == 3)
    succeeded = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED, tick__isnull=False)

    def three_ticks_each() -> bool:
        counts = succeeded.values("job").annotate(n=Count("id")).values_list("n", flat=True)
        return len(counts) == JOBS and min(counts) >= 3

    wait_for(three_ticks_each, timeout=60, interval=0.2)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        out, err = worker.communicate(timeout=30)
        assert worker.returncode == exitcodes.SIGTERM, err
        assert "stopped" in out
    assert workers_present(observer) == 0
    runs = JobRun.objects.filter(job__startswith="every2_", status=RunStatus.SUCCEEDED)
    # Each body ran once per run, and each (job, tick) once.
    assert Marker.objects.filter(job__startswith="every2_").count() == runs.count()
    assert not runs.values("job", "tick").annotate(n=Count("id")).filter(n__gt=1).exists()
    for number in range(JOBS):
        ticks = sorted(
            tick
            for tick in runs.filter(job=f"every2_{number}").values_list("tick", flat=True)
            if tick
        )
        assert len(ticks) >= 3, (number, ticks)
        gaps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(ticks)}
        assert gaps == {2.0}, (number, ticks)  # no tick missed in between
    winners = set(Marker.objects.filter(job__startswith="every2_").values_list("pid", flat=True))
    assert len(winners) >= 2, "one worker won every tick"


def test_sigterm_waits_for_the_grace_then_records_the_run_interrupted(
    worker_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "every2_slow", "--grace", "1")
    wait_for(lambda: JobRun.objects.filter(job="every2_slow", status="running").exists())
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "recorded as interrupted" in err
    assert ": 1 ran (1 of them failed), " in out, out  # the interrupted run counts
    (run,) = JobRun.objects.filter(job="every2_slow")
    assert run.status == RunStatus.INTERRUPTED and run.finished is not None
    wait_for(lambda: not holders(observer, job_key("every2_slow")), timeout=5)


def test_bad_input_is_one_line(worker_jobs: None, manage: Any) -> None:
    unknown = manage("cronworker", "no_such_job")
    assert unknown.returncode == exitcodes.USAGE
    assert unknown.stderr.strip() == "cronworker: no job named 'no_such_job'; see cronjob list"
    bad = manage("cronworker", "--max-concurrency", "0")
    assert bad.returncode == exitcodes.USAGE and "Traceback" not in bad.stderr


def test_an_invalid_schedule_is_one_line(manage: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "tasks"}))
    result = manage("cronworker", "--settings=tests.settings_badjobs")
    assert result.returncode == exitcodes.USAGE, result.stderr
    assert "bad_schedule" in result.stderr and "Traceback" not in result.stderr
