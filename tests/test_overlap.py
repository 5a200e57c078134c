"""Overlap policies (issue 38, item 1) through real processes: two ``cronworker`` replicas
run a job with ``overlap="allow_all"`` up to its ``max_concurrent`` runs at once, never more,
each tick once, for a job defined in code and a schedule kept in the database; the default
(``"skip"``) never overlaps; ``runlocked`` runs an ``allow_all`` job up to its bound and skips
beyond it; a bad value is refused in one line where it is typed (the policy itself and the
claim's slots: tests/unit/test_overlap.py)."""

from __future__ import annotations

import json
import signal
from datetime import datetime
from typing import Any

import pytest
from django.db.models import Count

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

#: Every replica's skip is recorded too, with why.
SETTINGS = {
    "JOBS_MODULE": "overlap_tasks",
    "RECORD_SKIPS": True,
    "MAX_SKEW": 0.9,
    "HEARTBEAT": 0.5,
    "LEASE": 2,
}


@pytest.fixture
def overlapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))


def bodies(name: str) -> list[tuple[datetime, datetime]]:
    """The start and end of each body of ``name`` that ended."""
    starts: dict[str, datetime] = {}
    ends: dict[str, datetime] = {}
    for marker in Marker.objects.filter(job=name).exclude(note="release"):
        kind, _, token = marker.note.partition(" ")
        (starts if kind == "start" else ends)[token] = marker.created
    return sorted((starts[token], ends[token]) for token in ends)


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most of ``spans`` that were going at one moment (an end before a start at the
    same instant)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    going = most = 0
    for _at, step in events:
        going += step
        most = max(most, going)
    return most


def ended(name: str) -> int:
    return Marker.objects.filter(job=name, note__startswith="end ").count()


@pytest.mark.slow
def test_two_replicas_run_up_to_max_concurrent_at_once_and_each_tick_once(
    overlapping: None, manage: Any, spawn: Any, raw_connect: Any, fresh_registry: None
) -> None:
    added = manage(
        "cronjob", "add", "overlap_db", "--job", "overlap_body", "--args", '["overlap_db"]',
        "--every", "2", "--overlap", "allow_all", "--max-concurrent", "3",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    observer = raw_connect()
    workers = [spawn("cronworker", "--grace", "10", "--max-concurrency", "10") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    names = {"overlap_two": 2, "overlap_db": 3, "overlap_skip": 1}
    wait_for(lambda: min(map(ended, names)) >= 5, timeout=120, interval=0.5)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = [worker.communicate(timeout=60)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors

    for name, bound in names.items():
        spans = bodies(name)
        assert most_at_once(spans) == bound, (name, spans)  # up to the bound, never more
        ran = JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED)
        twice = ran.values("tick").annotate(runs=Count("id")).filter(runs__gt=1)
        assert not twice.exists(), list(twice)  # each tick once
        assert ran.filter(tick__isnull=True).count() == 0
    runners = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    assert len({run.pid for run in runners}) == 2  # both replicas ran some


@pytest.mark.slow
def test_runlocked_runs_an_allow_all_job_up_to_its_bound(
    overlapping: None, spawn: Any, raw_connect: Any
) -> None:
    first, second = spawn("runlocked", "overlap_free"), spawn("runlocked", "overlap_free")
    wait_for(lambda: Marker.objects.filter(note__startswith="start ").count() == 2, timeout=60)
    third = spawn("runlocked", "overlap_free")
    out, err = third.communicate(timeout=60)
    assert third.returncode == exitcodes.OK, err
    assert out.startswith("overlap_free: skipped"), out
    Marker.objects.create(job="overlap_free", pid=0, note="release")
    outputs = [process.communicate(timeout=60) for process in (first, second)]
    assert [p.returncode for p in (first, second)] == [exitcodes.OK] * 2, outputs
    assert all(out.startswith("overlap_free: ran (run ") for out, _err in outputs), outputs
    assert most_at_once(bodies("overlap_free")) == 2
    statuses = sorted(JobRun.objects.filter(job="overlap_free").values_list("status", flat=True))
    assert statuses == [RunStatus.SKIPPED_LOCKED, RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]
    skip = JobRun.objects.get(job="overlap_free", status=RunStatus.SKIPPED_LOCKED)
    assert skip.error.startswith("its 2 runs going fill its 2 run slots (max_concurrent)"), skip
