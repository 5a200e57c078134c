"""A lock taken with ``advisory_lock("name")`` that is no job's is named on the held-locks page
(it said "unknown job"): while it holds the lock, the connection carries the lock's name as
its ``application_name``, set by the statement that took the lock (no round trip, no write),
and given back by the one that releases it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from django_advisory_cron import advisory_lock, held_locks

pytestmark = pytest.mark.usefixtures("transactional_db")

LOCKS_URL = reverse("admin:django_advisory_cron_heldlock_changelist")


@pytest.fixture
def staff(admin_client: Client) -> Client:
    return admin_client


def application_name(observer: Any, pid: int) -> str:
    row = observer.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s", (pid,))
    return str(row.fetchone()[0])


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_a_lock_that_is_no_jobs_is_named_on_the_held_locks_page(
    scope: str, raw_connect: Any, staff: Client
) -> None:
    observer = raw_connect()
    with advisory_lock("manual-maintenance", scope=scope) as lock:  # type: ignore[arg-type]
        assert lock.acquired
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        pid = int(row[0])
        (held,) = held_locks().filter(pid=pid)
        assert held.job is None and held.lock_name == "manual-maintenance"
        body = staff.get(LOCKS_URL).content.decode()
        assert "manual-maintenance" in body and "unknown job" not in body
    if scope == "session":  # the kept connection is named as before once it holds nothing
        assert application_name(observer, pid) == "django-advisory-cron"


def test_a_lock_not_taken_leaves_its_connection_named_as_before() -> None:
    with advisory_lock("busy-elsewhere", scope="session") as mine:
        assert mine.acquired
        with advisory_lock("busy-elsewhere", scope="session") as other:
            assert not other.acquired
            row = other.send(("SELECT current_setting('application_name')", {}))
            assert row == ("django-advisory-cron",)
