"""What could differ between PostgreSQL majors, checked on whichever server the suite runs on.

CI runs the suite on two majors (Debian's 15 and the embedded wheel's 18), so each of these
holds on both. The held-locks view (migration 0002) reads ``pg_locks.waitstart``, which
PostgreSQL added in 14: that is why 12 and 13 are not supported.
"""

from __future__ import annotations

import importlib
import re
import threading
import time

import pytest
from django.db import connection

from django_advisory_cron.models import HeldLock

VIEW_SQL: str = importlib.import_module(
    "django_advisory_cron.migrations.0002_heldlock_registeredjob"
).VIEW

#: ``hashtext()`` of a few job names, as PostgreSQL 15 and 18 both compute them. A script
#: that locks ``hashtext(name)`` and a ``key="hashtext"`` job share a lock only while these
#: agree, and the admin names such locks by computing hashtext on the server.
HASHTEXT = {
    "nightly": 2091003772,
    "legacy.nightly": 1077372711,
    "send_daily_digest": -1957215242,
    "": -1477818771,
}


def server_version_num() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version_num')::int")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def columns_of(relation: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
            [relation],
        )
        return {name for (name,) in cursor.fetchall()}


@pytest.mark.django_db
def test_server_is_a_supported_major() -> None:
    assert server_version_num() >= 140000, "pg_locks.waitstart needs PostgreSQL 14"


@pytest.mark.django_db
@pytest.mark.parametrize(("alias", "relation"), [("l", "pg_locks"), ("a", "pg_stat_activity")])
def test_catalog_columns_the_view_reads_exist(alias: str, relation: str) -> None:
    used = set(re.findall(rf"\b{alias}\.(\w+)", VIEW_SQL))
    assert used, f"the view reads no {relation} column?"
    assert used <= columns_of(relation), f"missing in {relation}: {used - columns_of(relation)}"
    if relation == "pg_locks":
        assert "waitstart" in used


@pytest.mark.django_db
def test_hashtext_agrees_across_majors() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join(["hashtext(%s)"] * len(HASHTEXT)), list(HASHTEXT.keys())
        )
        row = cursor.fetchone()
    assert row is not None
    assert dict(zip(HASHTEXT, row, strict=True)) == HASHTEXT


def test_waiting_lock_shows_waitstart_in_the_view(raw_connect) -> None:
    """A backend queued behind a held advisory lock has a ``waitstart`` (PostgreSQL 14+)."""
    holder, waiter = raw_connect(), raw_connect()
    holder.execute("SELECT pg_advisory_lock(4242, 17)")
    waiter_pid = waiter.info.backend_pid
    thread = threading.Thread(
        target=lambda: waiter.execute("SELECT pg_advisory_lock(4242, 17)"), daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not HeldLock.objects.filter(pid=waiter_pid, granted=False).exists():
            assert time.monotonic() < deadline, "the second backend never queued for the lock"
            time.sleep(0.05)
        waiting = HeldLock.objects.get(pid=waiter_pid, granted=False)
        held = HeldLock.objects.get(pid=holder.info.backend_pid, granted=True)
        assert (waiting.key1, waiting.key2, waiting.objsubid) == (4242, 17, 2)
        assert waiting.waitstart is not None
        assert held.waitstart is None
        assert waiting.application_name == held.application_name
        assert waiting.state == "active"
        assert "pg_advisory_lock" in waiting.query
    finally:
        holder.execute("SELECT pg_advisory_unlock(4242, 17)")
        thread.join(10)
    assert not thread.is_alive()
    waiter.execute("SELECT pg_advisory_unlock(4242, 17)")
