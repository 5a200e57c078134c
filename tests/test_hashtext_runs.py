"""A job keyed ``hashtext(name)`` goes through the same claim, heartbeat and finish as any job.

The claim, the lease renewal and the finish are written once for both key forms (two ints, or
a ``hashtext`` key the server computes), so a job sharing its lock with a SQL script must behave
as a two-int job does: held off while the script holds the lock, once per tick, its lease
renewed while it runs. Real PostgreSQL; the script is a plain connection.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.core.scopes import Scope
from django_advisory_cron.models import JobRun, RunStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
NAME = "shared_with_a_script"


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_a_hashtext_job_waits_for_the_script_then_runs_its_tick_once(
    raw_connect, scope: Scope
) -> None:
    calls: list[str] = []

    @locked_task(name=NAME, schedule="*/5 * * * *", key="hashtext", scope=scope)
    def shared() -> None:
        calls.append("ran")

    script = raw_connect()
    script.execute("SELECT pg_advisory_lock(hashtext(%s))", (NAME,))
    assert shared.run(now=TICK).status == RunStatus.SKIPPED_LOCKED
    script.execute("SELECT pg_advisory_unlock(hashtext(%s))", (NAME,))

    first = shared.run(now=TICK + timedelta(seconds=2))
    second = shared.run(now=TICK + timedelta(seconds=4))
    assert first.status == RunStatus.SUCCEEDED and first.tick == TICK
    assert second.status == RunStatus.SKIPPED_TICK and second.tick == TICK
    assert calls == ["ran"]
    statuses = JobRun.objects.filter(job=NAME).order_by("id").values_list("status", flat=True)
    assert list(statuses) == ["succeeded"]  # the skips wrote nothing
    # Nothing is left locked: the script takes the lock at once.
    assert script.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (NAME,)).fetchone() == (
        True,
    )


@override_settings(ADVISORY_CRON={"HEARTBEAT": 0.2, "LEASE": 1.0})
def test_a_hashtext_job_renews_its_lease_while_it_runs() -> None:
    running, release = threading.Event(), threading.Event()

    @locked_task(name=NAME, key="hashtext", scope="session")
    def shared() -> None:
        running.set()
        release.wait(30)

    results = []
    thread = threading.Thread(target=lambda: results.append(shared.run()))
    thread.start()
    try:
        assert running.wait(30)
        row = JobRun.objects.get(job=NAME)
        first_lease = row.lease_until
        assert first_lease is not None
        # Renewed by the heartbeat well past its first value: the lock check found the key.
        wait_for(
            lambda: (
                (JobRun.objects.get(job=NAME).lease_until or first_lease)
                > first_lease + timedelta(seconds=0.5)
            ),
            timeout=10,
        )
    finally:
        release.set()
        thread.join(30)
    assert [result.status for result in results] == [RunStatus.SUCCEEDED]
    assert JobRun.objects.get(job=NAME).lease_until is None
