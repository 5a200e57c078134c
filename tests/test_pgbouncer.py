"""The PgBouncer trap reproduced, and the safe paths proven, through a real PgBouncer.

Connections through PgBouncer 1.18 in transaction mode must not use prepared statements
(``prepare_threshold=None``); Django's psycopg backend already turns them off.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections
from django.test import override_settings

from django_advisory_cron import advisory_lock, registry
from django_advisory_cron.core.keys import LockKey, job_key
from django_advisory_cron.db.connections import close_lock_connections, idle_lock_connections
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.testing import PgBouncer, start_pgbouncer
from tests.jobsapp.models import Marker

from .pglocks import holders
from .pooling import bouncer_entry, bouncer_url, database_alias, upstream, wait_for

pytestmark = [pytest.mark.pgbouncer, pytest.mark.usefixtures("transactional_db")]

TRY = "SELECT pg_try_advisory_lock(%s, %s), pg_backend_pid()"
UNLOCK = "SELECT pg_advisory_unlock(%s, %s), pg_backend_pid()"


def through(bouncer: PgBouncer) -> psycopg.Connection[Any]:
    return psycopg.connect(bouncer_url(bouncer), autocommit=True, prepare_threshold=None)


def test_the_trap_session_lock_survives_its_unlock(
    pgbouncer_transaction: PgBouncer, raw_connect: Any
) -> None:
    """Session lock through transaction pooling: the unlock runs elsewhere and does nothing."""
    key = LockKey("trap-demo")
    args = (key.namespace, key.objid)
    observer = raw_connect()  # direct to the server
    client, other, busy = (through(pgbouncer_transaction) for _ in range(3))
    try:
        got, lock_pid = client.execute(TRY, args).fetchone()  # type: ignore[misc]
        assert got is True
        assert holders(observer, key) == [lock_pid]
        # Another client of the pool starts a transaction: PgBouncer hands it the server
        # connection just released by ``client`` (the one holding the lock).
        other.execute("BEGIN")
        other_pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        assert other_pid == lock_pid
        for _ in range(5):  # more traffic through the pool
            busy.execute("SELECT count(*) FROM pg_class").fetchone()
        unlocked, unlock_pid = client.execute(UNLOCK, args).fetchone()  # type: ignore[misc]
        assert unlock_pid != lock_pid
        assert unlocked is False  # "you don't own a lock of type ExclusiveLock"
        other.execute("COMMIT")
        client.close()
        time.sleep(0.3)
        # The client is gone, yet the server still shows the lock, held by a pooled backend.
        assert holders(observer, key) == [lock_pid]
        assert observer.execute(TRY, args).fetchone()[0] is False
    finally:
        for conn in (client, other, busy):
            conn.close()
        observer.execute("SELECT pg_terminate_backend(%s)", (lock_pid,))
    assert wait_for(lambda: holders(observer, key) == [], 5)


def test_the_trap_through_advisory_lock_is_reported(
    pgbouncer_transaction: PgBouncer, raw_connect: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The library's own session lock behind transaction pooling: unlock fails loudly."""
    observer = raw_connect()
    key = job_key("trap-library")
    with database_alias("bouncer_tx", **bouncer_entry(pgbouncer_transaction)):
        other = through(pgbouncer_transaction)
        try:
            with (
                caplog.at_level(logging.ERROR, logger="django_advisory_cron"),
                advisory_lock(key, scope="session", using="bouncer_tx") as lock,
            ):
                assert lock.acquired
                (lock_pid,) = holders(observer, key)
                other.execute("BEGIN")
                assert other.execute("SELECT pg_backend_pid()").fetchone() == (lock_pid,)
            other.execute("COMMIT")
        finally:
            other.close()
        assert "the unlock did nothing" in caplog.text
        assert holders(observer, key) == [lock_pid]
        observer.execute("SELECT pg_terminate_backend(%s)", (lock_pid,))
    assert wait_for(lambda: holders(observer, key) == [], 5)


@pytest.fixture
def edge_jobs(fresh_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge jobs, registered here and in every subprocess the test starts."""
    import tests.jobsapp.edge_tasks as module

    importlib.reload(module)  # registers them again after an earlier test's cleanup
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "edge_tasks"}))


@pytest.fixture
def fresh_pgbouncer_transaction(django_db_setup: None) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode of this test's own, three server connections, none of
    them left busy or holding a probe's shared lock by an earlier test."""
    with start_pgbouncer(upstream(), pool_size=3) as bouncer:
        yield bouncer


def test_transaction_scope_through_transaction_pooling_runs_exactly_once(
    fresh_pgbouncer_transaction: PgBouncer,
    spawn: Any,
    raw_connect: Any,
    edge_jobs: None,
    tmp_path: Any,
) -> None:
    """5 threads and 5 ``runlocked`` processes race one job through the same PgBouncer; the
    winner holds the lock until the other nine have skipped (writing nothing)."""
    pgbouncer_transaction = fresh_pgbouncer_transaction
    observer = raw_connect()
    name = "edge_hold_transaction"
    job = registry.get(name)
    assert job.scope == "transaction"
    release = str(tmp_path / "release")
    url = bouncer_url(pgbouncer_transaction)
    with database_alias("bouncer_tx", **bouncer_entry(pgbouncer_transaction)):
        # The winner's body waits up to 180 s for the release: room for a busy host to start
        # the five processes (the test waits for the skips, not for a fixed time).
        processes = [spawn("runlocked", name, release, "180", url=url) for _ in range(5)]
        outcomes: list[str] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(5)

        def contender() -> None:
            try:
                barrier.wait()
                outcomes.append(job.run(release, "180", using="bouncer_tx").status)
            except BaseException as error:
                errors.append(error)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=contender) for _ in range(5)]
        for thread in threads:
            thread.start()
        # While the winner runs, exactly one backend holds the job's lock.
        assert wait_for(lambda: holders(observer, job.key), 30)

        def skipped() -> int:
            return len(outcomes) + len(errors) + sum(p.poll() is not None for p in processes)

        assert wait_for(lambda: skipped() >= 9, 150), (outcomes, errors)
        assert len(holders(observer, job.key)) == 1
        Path(release).touch()
        for thread in threads:
            thread.join(60)
        results = [process.communicate(timeout=60) for process in processes]
        codes = [process.returncode for process in processes]
    assert errors == []
    assert codes == [0] * 5, results
    assert Marker.objects.filter(job=name).count() == 1
    statuses = sorted(JobRun.objects.filter(job=name).values_list("status", flat=True))
    assert statuses == [RunStatus.SUCCEEDED]
    assert len(outcomes) == 5 and outcomes.count(RunStatus.SKIPPED_LOCKED) >= 4, outcomes
    # The commit released it: nothing left on any server connection of the pool.
    assert holders(observer, job.key) == []


# -- Django's own connection pool (OPTIONS["pool"]) on the lock alias ----------------------


@pytest.fixture
def pooled_alias() -> Any:
    pytest.importorskip("psycopg_pool")
    options = {"pool": {"min_size": 1, "max_size": 1}}
    with database_alias("pooled", OPTIONS=options) as alias:
        yield alias


def test_djangos_pool_keeps_a_session_lock_after_close(pooled_alias: str, raw_connect: Any) -> None:
    """Why the lock connection must bypass the pool: close() only returns it to the pool."""
    observer = raw_connect()
    key = job_key("pool-hazard")
    pooled = connections[pooled_alias]
    with pooled.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_lock(%s, %s), pg_backend_pid()", list(key.params.values())
        )
        pool_pid = cursor.fetchone()[1]
    pooled.close()
    time.sleep(0.2)
    assert holders(observer, key) == [pool_pid]
    with pooled.cursor() as cursor:  # max_size=1: the same backend comes back
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(key.params.values()))
        assert cursor.fetchone() == (True,)
    pooled.close()


def test_session_lock_on_a_pooled_alias_bypasses_the_pool(
    pooled_alias: str, raw_connect: Any, settings: Any
) -> None:
    settings.ADVISORY_CRON = {**settings.ADVISORY_CRON, "LOCK_POOL_SIZE": 8}  # keep it warm
    observer = raw_connect()
    key = job_key("pool-bypass")
    pooled = connections[pooled_alias]
    pooled.ensure_connection()
    assert getattr(pooled, "pool", None) is not None  # Django really pools this alias
    with pooled.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pool_pid = cursor.fetchone()[0]
    pooled.close()
    with advisory_lock(key, scope="session", using=pooled_alias) as lock:
        assert lock.acquired and lock.connection is not None
        assert "pool" not in lock.connection.settings_dict["OPTIONS"]
        (lock_pid,) = holders(observer, key)
        assert lock_pid != pool_pid
    # Released for real; the lock's connection is kept warm by this app (not Django's pool)
    # holding no advisory lock at all, and closing the warm set ends its backend.
    assert holders(observer, key) == []
    assert idle_lock_connections(pooled_alias) == 1
    advisory = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s"
    assert observer.execute(advisory, (lock_pid,)).fetchone() == (0,)
    assert close_lock_connections(pooled_alias) == 1
    assert wait_for(
        lambda: (
            not observer.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (lock_pid,)
            ).fetchone()
        ),
        5,
    )


def test_job_runs_on_a_pooled_alias_in_both_scopes(pooled_alias: str, raw_connect: Any) -> None:
    observer = raw_connect()
    for name, scope in (("sleepy", "session"), ("transactional", "transaction")):
        job = registry.get(name)
        result = job.run("0", scope=scope, using=pooled_alias)  # type: ignore[arg-type]
        assert result.status == RunStatus.SUCCEEDED, result
        assert holders(observer, job.key) == []
    assert Marker.objects.count() == 2


def test_heartbeat_reports_a_session_lock_behind_transaction_pooling_as_lost(
    pgbouncer_transaction: PgBouncer, raw_connect: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat asks whether *its* backend holds the lock; behind transaction pooling its
    statement lands on another server connection, and the lock is reported lost."""
    observer = raw_connect()
    key = job_key("trap-heartbeat")
    with (
        database_alias("bouncer_tx", **bouncer_entry(pgbouncer_transaction)),
        override_settings(ADVISORY_CRON={"HEARTBEAT": 0.1}),
    ):
        other = through(pgbouncer_transaction)
        try:
            with advisory_lock(key, scope="session", using="bouncer_tx") as lock:
                (lock_pid,) = holders(observer, key)
                other.execute("BEGIN")  # takes the server connection that holds the lock
                assert other.execute("SELECT pg_backend_pid()").fetchone() == (lock_pid,)
                assert wait_for(lambda: lock.lost, 3, interval=0.02)
            other.execute("COMMIT")
        finally:
            other.close()
    assert "is no longer held by its connection" in caplog.text
    observer.execute("SELECT pg_terminate_backend(%s)", (lock_pid,))
    assert wait_for(lambda: holders(observer, key) == [], 5)
