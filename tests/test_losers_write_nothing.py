"""A replica that loses a tick writes nothing: the history holds runs, not R copies of every
skip. Locked elsewhere, tick already taken, job paused: no row, and in session scope one
statement in all. ``RECORD_SKIPS`` brings the per-replica skip rows back."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.test import override_settings

from django_advisory_cron import control, exitcodes, registry
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.db.connections import close_lock_connections
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.models import JobRun, JobState, RunStatus
from tests.statements import statements_sent
from tests.test_catchup import OnePass, hour_of, hourly, succeeded_ticks
from tests.test_worker_fleet import FLEET, db_now, stop, wait_for_ticks
from tests.unit.test_catchup import HOUR
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
EVERY_LOCK_FRESH = {"LOCK_POOL_SIZE": 0}
RECORDING = {"LOCK_POOL_SIZE": 0, "RECORD_SKIPS": True}


def at(seconds: float) -> datetime:
    return TICK + timedelta(seconds=seconds)


@contextmanager
def statements_on_lock_connections() -> Iterator[list[tuple[str, str]]]:
    """The statements sent on every connection opened meanwhile (a session lock's connection
    is one: with ``LOCK_POOL_SIZE`` 0 each lock opens its own). Idle lock connections an
    earlier test left warm are closed first, so that the lock opens one."""
    close_lock_connections()
    with statements_sent() as sent:
        yield sent


def hold_lock_elsewhere(raw_connect: Any, name: str) -> None:
    """Take the job's session lock on a connection of another replica."""
    other = raw_connect()
    other.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey(name).params)


@override_settings(ADVISORY_CRON=EVERY_LOCK_FRESH)
def test_a_late_replica_in_a_taken_tick_writes_nothing_in_one_statement() -> None:
    job = registry.get("quick_scheduled")
    assert job.run(now=at(-3)).status == RunStatus.SUCCEEDED
    with statements_on_lock_connections() as sent:
        late = job.run(now=at(3))
    assert late.status == RunStatus.SKIPPED_TICK and late.tick == TICK
    assert list(JobRun.objects.values_list("status", flat=True)) == ["succeeded"]
    assert len(sent) == 1, sent


@override_settings(ADVISORY_CRON=EVERY_LOCK_FRESH)
def test_a_late_replica_in_transaction_scope_writes_nothing() -> None:
    job = registry.get("quick_scheduled")
    assert job.run(now=at(-3), scope="transaction").status == RunStatus.SUCCEEDED
    late = job.run(now=at(3), scope="transaction")
    assert late.status == RunStatus.SKIPPED_TICK and late.tick == TICK
    assert list(JobRun.objects.values_list("status", flat=True)) == ["succeeded"]


@pytest.mark.parametrize("scope", ["session", "transaction"])
@override_settings(ADVISORY_CRON=EVERY_LOCK_FRESH)
def test_a_replica_that_meets_a_held_lock_writes_nothing(scope: str, raw_connect: Any) -> None:
    hold_lock_elsewhere(raw_connect, "quick_scheduled")
    with statements_on_lock_connections() as sent:
        result = registry.get("quick_scheduled").run(now=at(0), scope=scope)  # type: ignore[arg-type]
    assert result.status == RunStatus.SKIPPED_LOCKED and result.tick == TICK
    assert not JobRun.objects.exists()
    if scope == "session":
        assert len(sent) == 1, sent


@override_settings(ADVISORY_CRON=EVERY_LOCK_FRESH)
def test_a_paused_job_writes_nothing() -> None:
    control.pause("quick_scheduled", reason="maintenance")
    with statements_on_lock_connections() as sent:
        result = registry.get("quick_scheduled").run(now=at(0))
    assert result.status == RunStatus.SKIPPED_PAUSED and "maintenance" in (result.paused or "")
    assert not JobRun.objects.exists()
    assert len(sent) == 1, sent


@override_settings(ADVISORY_CRON=RECORDING)
def test_record_skips_keeps_a_row_per_skipping_replica(raw_connect: Any) -> None:
    job = registry.get("quick_scheduled")
    assert job.run(now=at(-3)).status == RunStatus.SUCCEEDED
    with statements_on_lock_connections() as sent:
        assert job.run(now=at(3)).status == RunStatus.SKIPPED_TICK
    assert len(sent) == 1, sent  # the skip row is written by the statement that found it
    hold_lock_elsewhere(raw_connect, "quick_scheduled")
    assert job.run(now=at(300)).status == RunStatus.SKIPPED_LOCKED
    control.pause("quick_scheduled")
    assert job.run(now=at(600)).status == RunStatus.SKIPPED_PAUSED
    statuses = sorted(JobRun.objects.values_list("status", flat=True))
    assert statuses == ["skipped_locked", "skipped_paused", "skipped_tick", "succeeded"]


@pytest.mark.parametrize("ended", ["resumed", "until passed"])
def test_ticks_a_pause_covered_are_decided_not_missed(ended: str) -> None:
    """A paused tick leaves no row, yet a worker that starts after the pause ended does not
    run it as a missed tick (catch_up="all" would run every missed one)."""
    job = hourly(f"paused_{ended.split()[0]}", catch_up="all")
    latest = hour_of(database_now("default"))
    job.run(now=latest - 3 * HOUR)
    control.pause(job.name, by="ops", reason="migration")
    JobState.objects.filter(job=job.name).update(paused_at=latest - 2 * HOUR - HOUR / 2)
    if ended == "resumed":
        control.resume(job.name)
    else:
        JobState.objects.filter(job=job.name).update(
            paused_until=database_now("default") - timedelta(seconds=1)
        )
    OnePass([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert succeeded_ticks(job.name) == [latest - 3 * HOUR]


def test_a_job_resumes_with_its_next_tick() -> None:
    """A pause decides every tick up to its end, those missed before it began included."""
    job = hourly("paused_late", catch_up="all")
    latest = hour_of(database_now("default"))
    job.run(now=latest - 3 * HOUR)
    control.pause(job.name)
    JobState.objects.filter(job=job.name).update(paused_at=latest - HOUR / 2)
    control.resume(job.name)
    OnePass([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert succeeded_ticks(job.name) == [latest - 3 * HOUR]


def test_a_manual_run_that_meets_a_held_lock_is_recorded(raw_connect: Any, manage: Any) -> None:
    """A run asked for by hand is one request, not a replica's attempt at a tick: what became
    of it is recorded, as before."""
    hold_lock_elsewhere(raw_connect, "quick_scheduled")
    done = manage("runlocked", "--manual", "quick_scheduled")
    assert done.returncode == 0 and "skipped, locked by another process" in done.stdout, done
    (row,) = JobRun.objects.all()
    assert (row.status, row.manual, row.tick) == (RunStatus.SKIPPED_LOCKED, True, None)


def test_three_workers_write_one_row_per_job_and_tick(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 ``cronworker`` processes, 5 two-second jobs, until each job has run two ticks: the
    history holds exactly the runs, one per (job, tick); the workers that lost wrote
    nothing."""
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(FLEET))
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(5)]
    workers = [spawn("cronworker", *names, "--grace", "5") for _ in range(3)]
    wait_for(lambda: workers_present(observer) == 3)
    started = db_now(observer)
    wait_for_ticks(names, started + timedelta(seconds=4))
    errors = stop(*workers)
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 3, errors
    rows = JobRun.objects.filter(job__in=names)
    assert set(rows.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}
    per_tick = Counter(rows.values_list("job", "tick"))
    assert set(per_tick.values()) == {1}, per_tick
    # Every worker took part in the ticks it lost: it logged the skips it wrote nothing for.
    assert all("skipped: tick" in error or "skipped: locked" in error for error in errors)
