"""Warm lock connections: reused between locks, yet never holding anything, never shared by
two holders, replaced when they died while idle, and never inherited across ``fork()``."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from django_advisory_cron import advisory_lock, locked_task
from django_advisory_cron.checks.configuration import check_connection_footprint
from django_advisory_cron.conf import problems
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.db.connections import (
    close_lock_connections,
    idle_lock_connections,
    warm_while_scheduling,
)
from django_advisory_cron.models import JobRun, RunStatus
from tests.pglocks import holders

pytestmark = pytest.mark.usefixtures("transactional_db")

THREADS = 8
RUNS = 200
JOBS = 4


@pytest.fixture(autouse=True)
def no_idle_connections(settings: Any) -> Any:
    """Warm connections on (a test process runs no scheduler: by default it keeps none)."""
    settings.ADVISORY_CRON = {**settings.ADVISORY_CRON, "LOCK_POOL_SIZE": 8}
    close_lock_connections()
    yield
    close_lock_connections()


def lock_pid(name: str) -> int:
    """Take and release a session lock; the backend pid its connection had."""
    with advisory_lock(name, scope="session") as lock:
        assert lock.acquired
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        return int(row[0])


def advisory_locks_of(observer: Any, pid: int) -> int:
    row = observer.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (pid,)
    ).fetchone()
    return int(row[0])


def test_a_returned_connection_holds_no_advisory_locks(raw_connect) -> None:
    observer = raw_connect()
    with advisory_lock("warm-a", scope="session") as lock:
        assert lock.acquired
        # A second lock on the same connection (and the held one taken again, re-entrantly):
        # the release must leave none of them behind.
        stray = LockKey("warm-stray")
        lock.send((f"SELECT pg_try_advisory_lock({stray.sql})", stray.params))
        lock.send((f"SELECT pg_try_advisory_lock({lock.key.sql})", lock.key.params))
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        pid = int(row[0])
        assert advisory_locks_of(observer, pid) == 2
    assert idle_lock_connections() == 1
    assert advisory_locks_of(observer, pid) == 0
    assert holders(observer, LockKey("warm-a")) == []
    # The next lock reuses the warm connection.
    assert lock_pid("warm-b") == pid
    assert advisory_locks_of(observer, pid) == 0


def test_a_skip_returns_its_connection_without_a_statement(raw_connect) -> None:
    observer = raw_connect()
    holder = raw_connect()
    key = LockKey("warm-skip")
    holder.execute(f"SELECT pg_advisory_lock({key.sql})", key.params)
    with advisory_lock("warm-skip", scope="session") as lock:
        assert not lock.acquired
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        pid = int(row[0])
    assert idle_lock_connections() == 1
    assert advisory_locks_of(observer, pid) == 0


@pytest.mark.usefixtures("fresh_registry")
def test_threads_never_run_one_job_twice_at_once() -> None:
    """8 threads x 200 runs over 4 jobs, all on warm connections: a job's body never sees
    another run of itself in progress."""
    running = dict.fromkeys(range(JOBS), 0)
    overlaps: list[int] = []
    ran = dict.fromkeys(range(JOBS), 0)
    guard = threading.Lock()

    def body(number: int) -> None:
        with guard:
            running[number] += 1
            if running[number] > 1:
                overlaps.append(number)
            ran[number] += 1
        time.sleep(0.0005)
        with guard:
            running[number] -= 1

    jobs = [
        locked_task(name=f"warm_{number}", scope="session")(lambda number=number: body(number))
        for number in range(JOBS)
    ]
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for index in range(RUNS):
                jobs[(seed + index) % JOBS].run().reraise()
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert overlaps == []
    # One row per run; the skips wrote nothing.
    runs = JobRun.objects.filter(job__startswith="warm_")
    assert runs.count() == runs.filter(status=RunStatus.SUCCEEDED).count() == sum(ran.values())
    # Reuse happened: the connections kept are bounded by the pool size.
    assert 1 <= idle_lock_connections() <= 8


def test_a_connection_killed_while_idle_is_replaced(raw_connect) -> None:
    observer = raw_connect()
    pid = lock_pid("warm-kill")
    assert idle_lock_connections() == 1
    assert observer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    deadline = time.monotonic() + 10
    while observer.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
        assert time.monotonic() < deadline, "the terminated backend never went away"
        time.sleep(0.01)
    time.sleep(0.05)  # the server's goodbye reaches our socket
    replacement = lock_pid("warm-kill")
    assert replacement != pid
    assert lock_pid("warm-kill") == replacement


def test_a_forked_child_opens_its_own_connection(raw_connect) -> None:
    parent_pid = lock_pid("warm-fork")
    assert idle_lock_connections() == 1
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            idle = idle_lock_connections()
            pid = lock_pid("warm-fork")
            os.write(writer, f"{idle} {pid}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    _, status = os.waitpid(child, 0)
    with os.fdopen(reader) as pipe:
        reported = pipe.read()
    assert os.waitstatus_to_exitcode(status) == 0
    idle, child_pid = map(int, reported.split())
    assert idle == 0
    assert child_pid != parent_pid
    # The parent's warm connection survived the child's exit.
    assert lock_pid("warm-fork") == parent_pid


@pytest.mark.parametrize(
    ("value", "check_id"),
    [({"LOCK_POOL_SIZE": -1}, "E130"), ({"LOCK_CONNECTION_MAX_AGE": 0}, "E131")],
)
def test_pool_settings_are_validated(value: dict[str, object], check_id: str) -> None:
    with override_settings(ADVISORY_CRON=value):
        assert [problem.check_id for problem in problems()] == [check_id]


def test_a_pool_that_could_exhaust_the_server_is_a_warning() -> None:
    assert check_connection_footprint(databases=["default"]) == []
    with override_settings(ADVISORY_CRON={"LOCK_POOL_SIZE": 100_000}):
        messages = check_connection_footprint(databases=["default"])
    assert [message.id for message in messages] == ["django_advisory_cron.W035"]
    assert "100000 idle lock connections, LOCK_POOL_SIZE" in messages[0].msg


def test_a_pool_size_of_zero_keeps_nothing() -> None:
    with override_settings(ADVISORY_CRON={"LOCK_POOL_SIZE": 0}):
        first, second = lock_pid("warm-zero"), lock_pid("warm-zero")
        assert idle_lock_connections() == 0
    assert first != second


def test_a_connection_older_than_the_max_age_is_closed() -> None:
    first = lock_pid("warm-age")
    with override_settings(ADVISORY_CRON={"LOCK_CONNECTION_MAX_AGE": 0.01}):
        time.sleep(0.02)
        second = lock_pid("warm-age")
    assert first != second


def test_by_default_a_scheduler_keeps_its_connections_while_it_runs(settings: Any) -> None:
    """A plain process keeps one that closes itself when idle (tests/test_warm_by_default.py);
    a scheduler's process keeps them while it runs, then closes them."""
    settings.ADVISORY_CRON = {
        key: value for key, value in settings.ADVISORY_CRON.items() if key != "LOCK_POOL_SIZE"
    }
    close_lock_connections()
    with warm_while_scheduling():
        first = lock_pid("warm.default")
        assert idle_lock_connections() == 1
        assert lock_pid("warm.default") == first
    assert idle_lock_connections() == 0
