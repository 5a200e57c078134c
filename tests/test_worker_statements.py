"""What a worker sends per tick: its claims and its runs' finishes, nothing else. The server's
clock, the live workers and whether a "run now" request is pending come with its claims'
answers; a run that ends within half a heartbeat is never beaten (at 50 replicas x 1,000
jobs these statements were 2.7 of the 25.6 a replica sent per tick)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from django_advisory_cron import locked_task, start_worker
from django_advisory_cron.conf import app_settings
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.jobs.job import registry
from django_advisory_cron.lock.shared import ClaimConnection
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from django_advisory_cron.run.runner import claim_together
from django_advisory_cron.worker.clock import DatabaseClock
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from django_advisory_cron.worker.requests import RunRequests
from tests.statements import statements_sent
from tests.waiting import CLAIM, wait_for

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

JOBS = ["statements_a", "statements_b", "statements_c"]


def nothing() -> None:
    return None


def kind(statement: str) -> str:
    text = " ".join(statement.split())
    if CLAIM in text:
        return "claim"
    if text.startswith("WITH w AS (UPDATE"):
        return "finish"
    if text.startswith("WITH f AS (") and 'UPDATE "django_advisory_cron_jobrun"' in text:
        return "finishes"  # the finishes of runs that ended together (db.finishes)
    return text[:60]


def succeeded(name: str) -> int:
    return JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).count()


def test_a_worker_sends_its_claims_and_finishes_and_nothing_else_per_tick() -> None:
    for name in JOBS:
        locked_task(name=name, every=1)(nothing)
    with statements_sent() as sent:
        worker = start_worker(JOBS, grace=5)
        try:
            wait_for(lambda: all(succeeded(name) >= 2 for name in JOBS))
            start, runs = len(sent), [succeeded(name) for name in JOBS]
            wait_for(lambda: all(succeeded(n) >= r + 4 for n, r in zip(JOBS, runs, strict=True)))
            main = threading.current_thread().name  # the test's own reads
            window = Counter(kind(text) for thread, text in sent[start:] if thread != main)
        finally:
            worker.close(timeout=15)
    ticks = sum(succeeded(name) for name in JOBS) - sum(runs)
    # Each run's finish goes alone, or with those of the others that ended at the same moment
    # (at most one run of each job).
    assert window["finish"] + len(JOBS) * window["finishes"] >= ticks - len(JOBS)
    assert window["finish"] + window["finishes"] <= ticks + len(JOBS)
    assert window["claim"] > 0
    others = {
        statement: n
        for statement, n in window.items()
        if statement not in {"claim", "finish", "finishes"}
    }
    assert others == {}, others


def test_a_beat_leaves_a_run_claimed_less_than_half_a_heartbeat_ago_alone(
    raw_connect: Any,
) -> None:
    locked_task(name="statements_held", every=60)(nothing)
    job = registry.get("statements_held")
    observer = raw_connect()
    claims = ClaimConnection("default")
    try:
        (claimed,), _skipped = claim_together([(job, None)], claims)
        run_id = claimed.result.run_id
        lease = observer.execute(
            "SELECT lease_until FROM django_advisory_cron_jobrun WHERE id = %s", [run_id]
        ).fetchone()
        claims._beat()  # at once: too young to be beaten
        assert (
            observer.execute(
                "SELECT lease_until FROM django_advisory_cron_jobrun WHERE id = %s", [run_id]
            ).fetchone()
            == lease
        )
        half = time.monotonic() + app_settings.HEARTBEAT / 2
        wait_for(lambda: time.monotonic() >= half)
        claims._beat()
        renewed = observer.execute(
            "SELECT lease_until FROM django_advisory_cron_jobrun WHERE id = %s", [run_id]
        ).fetchone()
        assert renewed > lease
        assert claimed.run().status == RunStatus.SUCCEEDED
    finally:
        claims.close()


def test_the_clock_is_read_again_when_the_hosts_clock_jumps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A VM resumed after a suspension: its monotonic clock stood still while the host's clock
    (set again on resume) moved on, so the clock advanced since the last reading is behind."""
    presence = ClaimConnection("default", presence="statements-clock-test", census=PRESENCE_NAME)
    presence.open()
    clock = DatabaseClock(presence)
    reads: list[datetime] = []
    read = clock.read

    def counted() -> datetime:
        reads.append(read())
        return reads[-1]

    monkeypatch.setattr(clock, "read", counted)
    try:
        clock.now()
        clock.now()
        assert len(reads) == 1  # advanced on the monotonic clock
        wall = time.time
        monkeypatch.setattr(time, "time", lambda: wall() + 120)
        clock.now()
        assert len(reads) == 2
    finally:
        presence.close()


def test_a_waiting_job_gives_up_after_its_wait_with_one_skip_per_tick(
    raw_connect: Any, settings: Any
) -> None:
    """A ``wait=`` job whose lock another process holds is tried again on the worker's
    connection until its wait is over; only then is its skip written, once per tick."""
    settings.ADVISORY_CRON = {**settings.ADVISORY_CRON, "RECORD_SKIPS": True}
    locked_task(name="statements_waiting", every=2, wait=0.6)(nothing)
    script = raw_connect()
    script.execute(
        "SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)",
        LockKey("statements_waiting").params,
    )
    skips = JobRun.objects.filter(job="statements_waiting", status=RunStatus.SKIPPED_LOCKED)
    worker = start_worker(["statements_waiting"], grace=5)
    try:
        wait_for(lambda: skips.count() >= 2)
    finally:
        worker.close(timeout=15)
    ticks = Counter(skips.values_list("tick", flat=True))
    assert set(ticks.values()) == {1}, ticks
    assert (
        not JobRun.objects.filter(job="statements_waiting")
        .exclude(status=RunStatus.SKIPPED_LOCKED)
        .exists()
    )


def test_a_schedule_added_as_the_worker_starts_to_listen_is_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A schedule added while a worker starts, as it begins to LISTEN, is run at its next
    tick, not minutes later. The worker used to read the schedules before its LISTEN: a change
    in between was read by nobody and heard by nobody, and three workers started as a schedule
    was added once waited 30 s for it in vain. It listens first now, then reads."""
    locked_task(name="statements_late")(nothing)
    listen = RunRequests.listen

    def listen_after_a_change(self: RunRequests, presence: ClaimConnection) -> None:
        Schedule.objects.create(name="statements_added", job="statements_late", every=1)
        listen(self, presence)

    monkeypatch.setattr(RunRequests, "listen", listen_after_a_change)
    worker = start_worker(grace=5)
    try:
        wait_for(lambda: succeeded("statements_added") >= 1, timeout=10)
    finally:
        worker.close(timeout=15)
