"""Overlap policies (issue 38, item 1) through real processes: two ``cronworker`` replicas
run a job with ``overlap="allow_all"`` up to its ``max_concurrent`` runs at once, never more,
each tick once, for a job defined in code and a schedule kept in the database; the default
(``"skip"``) never overlaps; ``runlocked`` runs an ``allow_all`` job up to its bound and skips
beyond it; a bad value is refused in one line where it is typed (the policy itself and the
claim's slots: tests/unit/test_overlap.py)."""

from __future__ import annotations

import importlib
import itertools
import json
import re
import signal
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import Count
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from django_advisory_cron.ops.heldlocks import held_locks
from tests.admin_users import logged_in
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
        "--every", "1", "--overlap", "allow_all", "--max-concurrent", "3",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    observer = raw_connect()
    names = {"overlap_two": 2, "overlap_db": 3, "overlap_skip": 1}
    workers = [
        spawn("cronworker", *names, "--grace", "10", "--max-concurrency", "10") for _ in range(2)
    ]
    wait_for(lambda: workers_present(observer) == 2)
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
    overlapping: None, spawn: Any, raw_connect: Any, fresh_registry: None
) -> None:
    first, second = spawn("runlocked", "overlap_free"), spawn("runlocked", "overlap_free")
    wait_for(lambda: Marker.objects.filter(note__startswith="start ").count() == 2, timeout=60)
    # Held locks names both runs' locks (two slots, two keys) for their job.
    importlib.reload(importlib.import_module("tests.jobsapp.overlap_tasks"))
    held = list(held_locks().filter(job="overlap_free", granted=True))
    assert len({(lock.classid, lock.objid) for lock in held}) == 2, held
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


REPLACED = "replaced by a new run (overlap terminate_other) started by host "


@pytest.mark.slow
def test_runlocked_s_new_run_terminates_the_one_going(
    overlapping: None, spawn: Any, raw_connect: Any
) -> None:
    old = spawn("runlocked", "overlap_replace")
    wait_for(lambda: Marker.objects.filter(note__startswith="start ").count() == 1, timeout=60)
    new = spawn("runlocked", "overlap_replace")
    # The old holder stops at once, as on a lost lock; its row says it was replaced.
    _out, err = old.communicate(timeout=60)
    assert old.returncode == exitcodes.LOCK_LOST, err
    wait_for(lambda: Marker.objects.filter(note__startswith="start ").count() == 2, timeout=60)
    Marker.objects.create(job="overlap_replace", pid=0, note="release")
    out, err = new.communicate(timeout=60)
    assert new.returncode == exitcodes.OK and out.startswith("overlap_replace: ran"), (out, err)
    first, second = JobRun.objects.filter(job="overlap_replace").order_by("started")
    assert first.status == RunStatus.LOCK_LOST and first.error.startswith(REPLACED), first.error
    assert first.finished is not None and first.lease_until is None
    assert second.status == RunStatus.SUCCEEDED and second.error == ""


@pytest.mark.slow
def test_two_replicas_replace_each_tick_s_run_with_the_next_s(
    overlapping: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    workers = [spawn("cronworker", "overlap_replace_every", "--grace", "5") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    runs = JobRun.objects.filter(job="overlap_replace_every", tick__isnull=False)
    wait_for(lambda: runs.filter(error__startswith=REPLACED).count() >= 3, timeout=90, interval=0.5)
    Marker.objects.create(job="overlap_replace_every", pid=0, note="release")
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = [worker.communicate(timeout=60)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors
    taken = runs.exclude(status__in=(RunStatus.SKIPPED_LOCKED, RunStatus.SKIPPED_TICK))
    ticks = [run.tick for run in taken.order_by("tick")]
    assert len(ticks) == len(set(ticks)), ticks  # each tick once
    replaced = [run for run in taken.order_by("tick") if run.error.startswith(REPLACED)]
    assert all(run.status == RunStatus.LOCK_LOST for run in replaced), replaced
    # Every run but the last few was replaced by the next tick's, not failed.
    assert not taken.filter(status=RunStatus.FAILED).exists(), list(taken)
    # ... at once: it ended as the next tick's run started.
    following = dict(itertools.pairwise(ticks))
    for run in replaced:
        after = taken.get(tick=following[run.tick])
        assert run.finished is not None and run.finished - after.started < timedelta(seconds=3)


#: A refusal of each kind, as ``cronjob`` says it.
UNKNOWN = (
    "overlap must be 'skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other' or "
    "'terminate_other', not 'sometimes'"
)
BOUND = "max_concurrent must be a whole number from 1 to 32, not 33"
COMBINED = (
    "max_concurrent goes with overlap 'allow_all' only; overlap 'buffer_all' runs one tick at a "
    "time: remove max_concurrent or use 'allow_all'"
)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--overlap", "sometimes"], UNKNOWN),
        (["--overlap", "allow_all", "--max-concurrent", "33"], BOUND),
        (["--max-concurrent", "two"], "--max-concurrent must be a whole number, not 'two'"),
        (["--overlap", "buffer_all", "--max-concurrent", "2"], COMBINED),
    ],
)
def test_cronjob_refuses_a_bad_policy_in_one_line(
    overlapping: None, manage: Any, flags: list[str], says: str
) -> None:
    refused = manage("cronjob", "add", "bad", "--job", "overlap_body", "--args", '["bad"]',
                     "--every", "60", *flags)  # fmt: skip
    assert refused.returncode != 0
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert says in refused.stderr, refused.stderr
    assert not Schedule.objects.exists()


def test_the_schedules_setting_refuses_a_policy_it_does_not_know(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = {"name": "later", "job": "overlap_body", "args": ["later"], "every": 60,
             "overlap": "sometimes"}  # fmt: skip
    settings = {"JOBS_MODULE": "overlap_tasks", "SCHEDULES": [entry]}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    checked = manage("check")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    reported = re.findall(r"^\?: \(django_advisory_cron\.(E\d+)\) (.*)$", checked.stderr, re.M)
    assert reported == [("E175", f"ADVISORY_CRON['SCHEDULES'][0] ('later'): {UNKNOWN}.")]


def test_the_admin_form_refuses_a_bad_policy_at_its_field(
    fresh_registry: None, django_user_model: Any
) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.overlap_tasks"))
    editor = logged_in(django_user_model, "editor", ["view_schedule", "add_schedule"])
    data = {"name": "bad", "job": "overlap_body", "args": '["bad"]', "kwargs": "{}",
            "every": "60", "enabled": "on", "overlap": "sometimes",
            "max_concurrent": "33"}  # fmt: skip
    response = editor.post(reverse("admin:django_advisory_cron_schedule_add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["overlap"] == [UNKNOWN], errors
    assert errors["max_concurrent"] == [BOUND], errors
    assert not Schedule.objects.exists()
    data.update(overlap="allow_all", max_concurrent="3")
    saved = editor.post(reverse("admin:django_advisory_cron_schedule_add"), data)
    assert saved.status_code == 302, saved.context and saved.context["adminform"].form.errors
    row = Schedule.objects.get()
    assert (row.overlap, row.max_concurrent) == ("allow_all", 3)


def test_migration_0027_undone_puts_back_the_claim_0016_installed(
    manage: Any, raw_connect: Any
) -> None:
    """One claim function either way: the one with the run slots, or, with 0027 undone, the
    one before it (20 arguments), which the release before calls."""
    observer = raw_connect()

    def arguments() -> list[int]:
        rows = observer.execute(
            "SELECT pronargs FROM pg_proc WHERE proname = 'django_advisory_cron_claim'"
        ).fetchall()
        return [row[0] for row in rows]

    assert arguments() == [24]
    try:
        back = manage("migrate", "django_advisory_cron", "0026")
        assert back.returncode == 0, back.stderr
        assert arguments() == [20]
    finally:
        forth = manage("migrate", "django_advisory_cron")
    assert forth.returncode == 0, forth.stderr
    assert arguments() == [24]
