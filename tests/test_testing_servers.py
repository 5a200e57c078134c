"""Real-server tests for the throwaway PostgreSQL / PgBouncer helpers.

Plain psycopg only, so these do not need Django settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import psycopg
import pytest

from django_advisory_cron.testing import (
    PgBouncer,
    PostgresNotFound,
    PostgresServer,
    find_pg_bindir,
    find_pgbouncer,
    parse_database_url,
    pgbouncer_version,
    start_pgbouncer,
    start_postgres,
)

_skip_without_pgbouncer = pytest.mark.skipif(
    find_pgbouncer() is None, reason="pgbouncer binary not installed"
)


def needs_pgbouncer(func: F) -> F:
    """Mark as a ``pgbouncer`` test and skip it only where the binary is absent."""
    return cast(F, pytest.mark.pgbouncer(_skip_without_pgbouncer(func)))


F = TypeVar("F", bound=Callable[..., Any])

HOLDS_LOCK_1_1 = """
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND classid = 1 AND objid = 1 AND objsubid = 2
          AND mode = 'ShareLock' AND granted AND pid = %s
    )
"""


def _start() -> PostgresServer:
    try:
        return start_postgres()
    except PostgresNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with _start() as server:
        yield server


@pytest.fixture(scope="module")
def restartable() -> Iterator[PostgresServer]:
    """A separate server, so restarting it cannot disturb the pooled tests."""
    with _start() as server:
        yield server


@pytest.fixture(scope="module")
def bouncer_tx(pg: PostgresServer) -> Iterator[PgBouncer]:
    with start_pgbouncer(pg, pool_mode="transaction") as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def bouncer_session(pg: PostgresServer) -> Iterator[PgBouncer]:
    with start_pgbouncer(pg, pool_mode="session") as bouncer:
        yield bouncer


def _select_one(url: str) -> int:
    # prepare_threshold=None: PgBouncer < 1.21 cannot pool prepared statements.
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        row = conn.execute("SELECT 1").fetchone()
    assert row is not None
    return int(row[0])


def _lock_through(url: str) -> int:
    """Take the shared advisory lock (1, 1) as a client, return the backend pid, close."""
    # autocommit: closing mid-transaction would make PgBouncer drop the server conn.
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        row = conn.execute("SELECT pg_advisory_lock_shared(1, 1), pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[1])


def _holds_lock(direct: psycopg.Connection[tuple[object, ...]], pid: int) -> bool:
    row = direct.execute(HOLDS_LOCK_1_1, (pid,)).fetchone()
    return bool(row and row[0])


def test_find_pg_bindir_has_server_binaries() -> None:
    bindir = find_pg_bindir()
    assert bindir is not None
    assert (bindir / "initdb").exists()
    assert (bindir / "pg_ctl").exists()


def test_find_pg_bindir_prefers_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PG_BINDIR", str(tmp_path))
    assert find_pg_bindir() == tmp_path


def test_start_postgres_rejects_dir_without_initdb(tmp_path: Path) -> None:
    with pytest.raises(PostgresNotFound, match="DATABASE_URL"):
        start_postgres(bindir=tmp_path)


def test_postgres_select_one(pg: PostgresServer) -> None:
    assert _select_one(pg.url()) == 1
    with psycopg.connect(pg.url()) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    assert row == ("200",)


def test_postgres_conninfo(pg: PostgresServer) -> None:
    info = pg.conninfo()
    assert info["ENGINE"] == "django.db.backends.postgresql"
    assert info["PORT"] == str(pg.port)
    assert parse_database_url(pg.url()) == {**info, "OPTIONS": {}}


def test_restart_accepts_new_connections(restartable: PostgresServer) -> None:
    conn = psycopg.connect(restartable.url(), autocommit=True)
    restartable.restart()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    assert _select_one(restartable.url()) == 1


def test_stop_and_start_server_only(restartable: PostgresServer) -> None:
    restartable.stop_server_only()
    assert not restartable.is_running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(restartable.url(), connect_timeout=2)
    restartable.start_server_only()
    assert restartable.is_running()
    assert _select_one(restartable.url()) == 1


def test_stop_removes_workdir() -> None:
    server = _start()
    workdir = server.workdir
    assert (server.datadir / "PG_VERSION").exists()
    server.stop()
    server.stop()  # idempotent
    assert not workdir.exists()


@needs_pgbouncer
def test_pgbouncer_version() -> None:
    version = pgbouncer_version()
    assert version is not None
    assert version[0].isdigit()


@needs_pgbouncer
def test_connect_through_pgbouncer(bouncer_tx: PgBouncer, bouncer_session: PgBouncer) -> None:
    assert _select_one(bouncer_tx.url()) == 1
    assert _select_one(bouncer_session.url()) == 1
    assert bouncer_tx.conninfo()["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert "DISABLE_SERVER_SIDE_CURSORS" not in bouncer_session.conninfo()


@needs_pgbouncer
def test_transaction_mode_leaks_session_advisory_lock(
    pg: PostgresServer, bouncer_tx: PgBouncer
) -> None:
    """No DISCARD ALL between clients: the lock outlives the client that took it."""
    pid = _lock_through(bouncer_tx.url())
    with psycopg.connect(pg.url(), autocommit=True) as direct:
        time.sleep(1.0)
        try:
            assert _holds_lock(direct, pid)
        finally:
            direct.execute("SELECT pg_terminate_backend(%s)", (pid,))


@needs_pgbouncer
def test_session_mode_releases_advisory_lock(
    pg: PostgresServer, bouncer_session: PgBouncer
) -> None:
    """Session mode runs server_reset_query (DISCARD ALL) when the client leaves."""
    pid = _lock_through(bouncer_session.url())
    with psycopg.connect(pg.url(), autocommit=True) as direct:
        deadline = time.monotonic() + 1.0
        while _holds_lock(direct, pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _holds_lock(direct, pid)


@needs_pgbouncer
def test_pgbouncer_recovers_after_postgres_restart(restartable: PostgresServer) -> None:
    with start_pgbouncer(restartable) as bouncer:
        assert _select_one(bouncer.url()) == 1
        restartable.restart()
        deadline = time.monotonic() + 5.0
        while True:
            try:
                assert _select_one(bouncer.url()) == 1
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        workdir = bouncer.workdir
    assert not workdir.exists()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgres://u%40x:p%3Aw@db.example:6432/app?sslmode=require&connect_timeout=5",
            {
                "NAME": "app",
                "USER": "u@x",
                "PASSWORD": "p:w",
                "HOST": "db.example",
                "PORT": "6432",
                "OPTIONS": {"sslmode": "require", "connect_timeout": "5"},
            },
        ),
        (
            "postgresql://%2Fvar%2Frun%2Fpostgresql/app",
            {"NAME": "app", "USER": "", "PASSWORD": "", "HOST": "/var/run/postgresql", "PORT": ""},
        ),
        (
            "postgresql://me@[::1]:5433/d",
            {"USER": "me", "HOST": "::1", "PORT": "5433", "NAME": "d"},
        ),
    ],
)
def test_parse_database_url(url: str, expected: dict[str, object]) -> None:
    parsed = parse_database_url(url)
    assert parsed["ENGINE"] == "django.db.backends.postgresql"
    assert {k: parsed[k] for k in expected} == expected


def test_parse_database_url_rejects_other_schemes() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        parse_database_url("mysql://u@h/db")
