"""``advisory_lock()`` is warm by default in every process, not only in schedulers, yet never
keeps a database busy: outside a scheduler its one kept connection closes itself after a short
idle time, so a test suite (or anyone) can still ``DROP DATABASE`` right after a lock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from django_advisory_cron import advisory_lock
from django_advisory_cron.db.connections import (
    IDLE_CLOSE,
    close_lock_connections,
    idle_lock_connections,
)
from tests.pooling import database_alias
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def default_pool(settings: Any) -> Iterator[None]:
    """The default ``LOCK_POOL_SIZE`` (a test process runs no scheduler)."""
    settings.ADVISORY_CRON = {
        key: value for key, value in settings.ADVISORY_CRON.items() if key != "LOCK_POOL_SIZE"
    }
    close_lock_connections()
    yield
    close_lock_connections()


def lock_pid(name: str, using: str | None = None) -> int:
    """Take and release a session lock; the backend pid of its connection."""
    with advisory_lock(name, scope="session", using=using) as lock:
        assert lock.acquired
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        return int(row[0])


def backend_alive(observer: psycopg.Connection[Any], pid: int) -> bool:
    row = observer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
    return bool(row.fetchone()[0])  # type: ignore[index]


def test_a_process_that_is_not_a_scheduler_reuses_its_lock_connection() -> None:
    first = lock_pid("warm-default")
    assert idle_lock_connections() == 1
    assert lock_pid("warm-default") == first


def test_an_idle_lock_connection_closes_itself(raw_connect: Any) -> None:
    observer = raw_connect()
    pid = lock_pid("warm-idle")
    assert idle_lock_connections() == 1 and backend_alive(observer, pid)
    wait_for(lambda: idle_lock_connections() == 0, timeout=IDLE_CLOSE + 10)
    wait_for(lambda: not backend_alive(observer, pid), timeout=10)
    # The next lock opens a new connection.
    assert lock_pid("warm-idle") != pid


def test_a_database_can_be_dropped_right_after_a_lock_on_it(raw_connect: Any) -> None:
    """``DROP DATABASE`` waits up to 5 s for the sessions on the database to go: the idle lock
    connection goes in ``IDLE_CLOSE`` seconds, so the drop succeeds, as a test runner's does."""
    admin = raw_connect()
    admin.execute("DROP DATABASE IF EXISTS warm_scratch")
    admin.execute("CREATE DATABASE warm_scratch")
    try:
        with database_alias("warm_scratch", NAME="warm_scratch"):
            lock_pid("warm-scratch", using="warm_scratch")
            assert idle_lock_connections("warm_scratch") == 1
            admin.execute("DROP DATABASE warm_scratch")
    finally:
        admin.execute("DROP DATABASE IF EXISTS warm_scratch (FORCE)")
