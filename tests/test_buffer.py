"""Overlap policies ``buffer_one`` and ``buffer_all`` (issue 38, item 1): a tick that comes
while a run of its job is going waits as a row of its own and starts as soon as that run ends,
once, whichever process sees the job free; ``buffer_one`` keeps one waiting and skips the
others, with why; ``buffer_all`` runs every such tick in turn, oldest first, up to its bound.
Through two real ``cronworker`` replicas (the bodies' start and end times, each tick once),
``runlocked``, and the recording itself on the server (the bound, once per tick). The policy's
pure parts: tests/unit/test_overlap.py."""

from __future__ import annotations

import importlib
import itertools
import json
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import Count, Q
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.core.overlap import MAX_BUFFERED, OVERLAPS
from django_advisory_cron.jobs import overlap
from django_advisory_cron.models import TICK_TAKING, JobRun, RunStatus, Schedule
from tests.admin_users import logged_in
from tests.jobsapp.models import Marker
from tests.test_overlap import bodies
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

SETTINGS = {"JOBS_MODULE": "buffer_tasks", "MAX_SKEW": 0.9, "HEARTBEAT": 0.5, "LEASE": 2}
#: The start of a skip's text when a tick is already waiting (buffer_one).
ONE_WAITS = "a tick is already waiting (overlap buffer_one): tick "
#: How soon after a run's end the tick waiting for it starts, at most, on a loaded machine.
RIGHT_AFTER = timedelta(seconds=1.5)
T0 = datetime(2026, 12, 24, 18, 0, tzinfo=UTC)


@pytest.fixture
def buffering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))


def tick(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


def ran(name: str) -> list[JobRun]:
    """The runs of ``name`` that took their tick, by start."""
    return list(
        JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).order_by("started", "id")
    )


def each_tick_once(name: str) -> None:
    runs = JobRun.objects.filter(job=name).exclude(
        status__in=(RunStatus.SKIPPED_LOCKED, RunStatus.SKIPPED_TICK, RunStatus.WAITING)
    )
    twice = runs.values("tick").annotate(runs=Count("id")).filter(runs__gt=1)
    assert not twice.exists(), list(twice)
    assert not runs.filter(tick__isnull=True).exists()
    # A tick waits once, and is skipped for the bound once, whichever replicas found it busy,
    # and never both: one row per (job, tick) besides the per-replica skips of a lost claim.
    kept = JobRun.objects.filter(job=name).filter(
        Q(status__in=[*TICK_TAKING, RunStatus.WAITING])
        | Q(status=RunStatus.SKIPPED_LOCKED, error__contains="(overlap buffer_")
    )
    per_tick = kept.values("tick").annotate(rows=Count("id")).filter(rows__gt=1)
    assert not per_tick.exists(), list(per_tick)


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    outputs = [worker.communicate(timeout=60) for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, outputs
    return [out for out, _err in outputs]


# -- the recording, on the server --------------------------------------------------------------


def test_a_tick_waits_once_whoever_records_it_and_buffer_one_skips_the_next_with_why() -> None:
    key = job_key("queued")
    first = overlap.wait("default", key, job="queued", tick=tick(0), policy="buffer_one")
    assert first == ("waiting", "waits for the run going to end (overlap buffer_one)")
    # Another replica that found the job busy at the same tick records nothing new.
    assert overlap.wait("default", key, job="queued", tick=tick(0), policy="buffer_one") == first
    skipped = overlap.wait("default", key, job="queued", tick=tick(2), policy="buffer_one")
    assert skipped == ("skipped_locked", f"{ONE_WAITS}2026-12-24T18:00:00Z")
    assert overlap.wait("default", key, job="queued", tick=tick(2), policy="buffer_one") == skipped
    assert JobRun.objects.filter(job="queued").count() == 2
    assert overlap.oldest("default", "queued") == tick(0)
    assert overlap.oldest("default", "queued", before=tick(0)) is None
    # Its run claimed, the tick no longer waits (and the next one may).
    JobRun.objects.create(
        job="queued", tick=tick(0), host="h", pid=1, status="running", started=tick(1)
    )
    assert overlap.oldest("default", "queued") is None
    assert not JobRun.objects.filter(job="queued", status=RunStatus.WAITING).exists()
    later = overlap.wait("default", key, job="queued", tick=tick(4), policy="buffer_one")
    assert later is not None and later[0] == "waiting"
    # A tick that has run is not recorded again.
    assert overlap.wait("default", key, job="queued", tick=tick(0), policy="buffer_one") is None


def test_buffer_all_keeps_up_to_its_bound_waiting_oldest_first_then_skips_with_why() -> None:
    key = job_key("all", "hashtext")
    for n in range(MAX_BUFFERED, 0, -1):  # recorded newest first: still started oldest first
        recorded = overlap.wait("default", key, job="all", tick=tick(n), policy="buffer_all")
        assert recorded == ("waiting", "waits for the run going to end (overlap buffer_all)")
    beyond = overlap.wait("default", key, job="all", tick=tick(99), policy="buffer_all")
    assert beyond == (
        "skipped_locked",
        f"{MAX_BUFFERED} ticks are already waiting, the bound (overlap buffer_all)",
    )
    row = JobRun.objects.get(job="all", tick=tick(99))
    assert row.finished is not None and row.lease_until is None
    waits = JobRun.objects.filter(job="all", status=RunStatus.WAITING)
    assert waits.count() == MAX_BUFFERED
    assert not waits.filter(lease_until__isnull=False).exists()  # no live run, nobody's
    assert overlap.oldest("default", "all") == tick(1)
    overlap.started("default", "all", tick(1))
    assert overlap.oldest("default", "all") == tick(2)


# -- runlocked -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_runlocked_s_tick_waits_while_a_run_goes_and_runs_as_soon_as_it_ends(
    buffering: None, spawn: Any
) -> None:
    ticks = [datetime(2026, 12, 24, hour, tzinfo=UTC).isoformat() for hour in (1, 2, 3)]
    first = spawn("runlocked", "--tick", ticks[0], "buffer_manual")
    wait_for(lambda: Marker.objects.filter(note__startswith="start ").count() == 1, timeout=60)
    second = spawn("runlocked", "--tick", ticks[1], "buffer_manual")
    out, err = second.communicate(timeout=60)
    assert second.returncode == exitcodes.OK, err
    assert out.strip() == (
        "buffer_manual: not run yet, tick 2026-12-24 02:00:00+00:00 waits for the run going "
        "to end (overlap buffer_one); whichever process sees the job free then starts it "
        "(nothing to do)"
    ), out
    third = spawn("runlocked", "--tick", ticks[2], "--conflict-exit-code", "3", "buffer_manual")
    out, err = third.communicate(timeout=60)
    assert third.returncode == 3, (out, err)
    # A conflict code given: the line goes to stderr, as a skip's does.
    said = err.strip().splitlines()[-1]
    assert said == f"runlocked: buffer_manual: skipped, {ONE_WAITS}2026-12-24T02:00:00Z", err
    Marker.objects.create(job="buffer_manual", pid=0, note="release")
    out, err = first.communicate(timeout=60)
    assert first.returncode == exitcodes.OK, err
    assert out.startswith("buffer_manual: ran (run "), out
    runs = ran("buffer_manual")
    assert [run.tick.hour for run in runs if run.tick] == [1, 2]
    assert {run.pid for run in runs} == {first.pid}  # the process whose run ended started it
    assert runs[1].started - runs[0].finished < RIGHT_AFTER  # type: ignore[operator]
    spans = bodies("buffer_manual")
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]
    assert not JobRun.objects.filter(job="buffer_manual", status=RunStatus.WAITING).exists()
    assert JobRun.objects.filter(job="buffer_manual").count() == 3  # two runs and the skip


# -- two cronworker replicas ---------------------------------------------------------------------


@pytest.mark.slow
def test_buffer_one_two_replicas_start_one_waiting_tick_right_after_each_run(
    buffering: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    workers = [spawn("cronworker", "buffer_one_every", "--grace", "10") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    wait_for(lambda: len(ran("buffer_one_every")) >= 4, timeout=90, interval=0.5)
    stop(workers)

    name = "buffer_one_every"
    spans = bodies(name)
    # One at a time.
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans)), spans
    each_tick_once(name)
    runs = ran(name)
    for before, after in itertools.pairwise(runs):
        assert before.finished is not None and after.tick is not None
        # The tick came while the run before went, waited, and started as soon as it ended.
        assert after.tick < before.finished, (before, after)
        assert timedelta(0) <= after.started - before.finished < RIGHT_AFTER, (before, after)
    skips = JobRun.objects.filter(job=name, error__startswith=ONE_WAITS)
    assert skips.count() >= len(runs) - 1  # at least one tick skipped during each run
    assert not skips.filter(tick__in=[run.tick for run in runs]).exists()
    assert JobRun.objects.filter(job=name, status=RunStatus.WAITING).count() <= 1


@pytest.mark.slow
def test_buffer_all_two_replicas_run_every_waiting_tick_in_order_once(
    buffering: None, manage: Any, spawn: Any, raw_connect: Any
) -> None:
    """For a job defined in code and a schedule kept in the database alike."""
    added = manage("cronjob", "add", "buffer_db", "--job", "buffer_body", "--args",
                   '["buffer_db"]', "--every", "1", "--overlap", "buffer_all")  # fmt: skip
    assert added.returncode == 0, added.stderr
    observer = raw_connect()
    names = ["buffer_all_every", "buffer_db"]
    workers = [spawn("cronworker", *names, "--grace", "10") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    wait_for(lambda: min(len(ran(name)) for name in names) >= 6, timeout=90, interval=0.5)
    stop(workers)

    for name in names:
        spans = bodies(name)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans)), spans
        each_tick_once(name)
        runs = ran(name)
        ticks = [run.tick for run in runs if run.tick is not None]
        assert ticks == sorted(ticks), ticks  # oldest first
        # No tick skipped: every one that came while a run went waited, and those not run yet
        # still wait, newer than every tick that ran.
        assert not JobRun.objects.filter(job=name, status=RunStatus.SKIPPED_LOCKED).exists()
        waits = JobRun.objects.filter(job=name, status=RunStatus.WAITING)
        assert waits.exists() and all(row.tick > ticks[-1] for row in waits)  # type: ignore[operator]
        everything = sorted([*ticks, *(row.tick for row in waits if row.tick is not None)])
        assert everything == [
            everything[0] + timedelta(seconds=n) for n in range(len(everything))
        ], everything  # no tick lost between the first and the last
        for before, after in itertools.pairwise(runs):
            assert before.finished is not None
            assert timedelta(0) <= after.started - before.finished < RIGHT_AFTER, (before, after)


@pytest.mark.slow
def test_a_waiting_tick_whose_replica_died_is_started_once_by_another(
    buffering: None, spawn: Any, raw_connect: Any
) -> None:
    """The replica running the job is killed (no end recorded): the tick waiting for it is
    started once the dead run's lease has expired, by the other replica, and not twice."""
    observer = raw_connect()
    workers = [spawn("cronworker", "buffer_held") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    name = "buffer_held"
    wait_for(lambda: JobRun.objects.filter(job=name, status=RunStatus.WAITING).exists(), 60)
    first = JobRun.objects.get(job=name, status=RunStatus.RUNNING)
    waited = JobRun.objects.get(job=name, status=RunStatus.WAITING).tick
    (holder,) = [worker for worker in workers if worker.pid == first.pid]
    (other,) = [worker for worker in workers if worker is not holder]
    holder.kill()
    holder.communicate(timeout=30)
    Marker.objects.create(job=name, pid=0, note="release")
    wait_for(lambda: JobRun.objects.filter(job=name, tick=waited, status="succeeded").exists(), 60)
    other.send_signal(signal.SIGTERM)
    _out, err = other.communicate(timeout=60)
    assert other.returncode == exitcodes.SIGTERM, err
    first.refresh_from_db()
    assert first.status == RunStatus.INTERRUPTED  # the dead run, found dead by the claim
    run = JobRun.objects.get(job=name, tick=waited, status=RunStatus.SUCCEEDED)
    assert run.pid == other.pid and first.lease_until is None
    each_tick_once(name)


# -- where a policy is typed -----------------------------------------------------------------


def test_cronjob_sets_a_buffering_policy_and_refuses_max_concurrent_beside_it(
    buffering: None, manage: Any
) -> None:
    added = manage("cronjob", "add", "queued", "--job", "buffer_manual", "--every", "60",
                   "--overlap", "buffer_all")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert Schedule.objects.get(name="queued").overlap == "buffer_all"
    refused = manage("cronjob", "edit", "queued", "--overlap", "buffer_one",
                     "--max-concurrent", "2")  # fmt: skip
    assert refused.returncode != 0
    combined = "max_concurrent goes with overlap 'allow_all' only; overlap 'buffer_one' runs"
    assert combined in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert Schedule.objects.get(name="queued").overlap == "buffer_all"


def test_the_schedules_setting_and_the_admin_form_take_a_buffering_policy(
    manage: Any, monkeypatch: pytest.MonkeyPatch, fresh_registry: None, django_user_model: Any
) -> None:
    entry = {"name": "later", "job": "buffer_manual", "every": 60, "overlap": "buffer_one"}
    settings = {"JOBS_MODULE": "buffer_tasks", "SCHEDULES": [entry]}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    checked = manage("check")
    assert checked.returncode == 0, checked.stderr
    importlib.reload(importlib.import_module("tests.jobsapp.buffer_tasks"))
    editor = logged_in(django_user_model, "editor", ["view_schedule", "add_schedule"])
    add = reverse("admin:django_advisory_cron_schedule_add")
    form = editor.get(add).context["adminform"].form
    assert all(policy in str(form.fields["overlap"].help_text) for policy in OVERLAPS)
    data = {"name": "queued", "job": "buffer_manual", "args": "[]", "kwargs": "{}",
            "every": "60", "enabled": "on", "overlap": "buffer_all",
            "max_concurrent": "2"}  # fmt: skip
    response = editor.post(add, data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["max_concurrent"], errors
    data["max_concurrent"] = ""
    saved = editor.post(add, data)
    assert saved.status_code == 302, saved.context and saved.context["adminform"].form.errors
    assert Schedule.objects.get(name="queued").overlap == "buffer_all"


def test_migration_0029_adds_the_one_wait_per_tick_index_and_undone_drops_it(
    manage: Any, raw_connect: Any
) -> None:
    observer = raw_connect()

    def indexes() -> list[str]:
        rows = observer.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname = 'advisory_cron_one_wait_per_tick'"
        ).fetchall()
        return [row[0] for row in rows]

    assert indexes() == ["advisory_cron_one_wait_per_tick"]
    try:
        back = manage("migrate", "django_advisory_cron", "0028")
        assert back.returncode == 0, back.stderr
        assert indexes() == []
    finally:
        forth = manage("migrate", "django_advisory_cron")
    assert forth.returncode == 0, forth.stderr
    assert indexes() == ["advisory_cron_one_wait_per_tick"]
