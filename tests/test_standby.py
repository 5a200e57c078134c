"""A standby is not a lock database: a real primary and a streaming standby on loopback.

Advisory locks work on a hot standby, so a lock taken there would exclude nobody on the
primary: ``runlocked`` and ``cronworker`` refuse a standby at connect time, and a system check
warns about it. A multi-host connection string with ``target_session_attrs=read-write`` makes
libpq skip the standby. Each test module starts its own pair, not the shared test cluster.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.db.connections import open_lock_connection
from django_advisory_cron.exceptions import ServerIsStandby
from django_advisory_cron.testing import (
    PostgresNotFound,
    PostgresServer,
    Standby,
    find_pgbouncer,
    start_pgbouncer,
    start_postgres,
    start_standby,
)
from django_advisory_cron.worker.reconnect import RECONNECT_PAUSES

from .conftest import MANAGE, Upstream, manage_env
from .pooling import database_alias
from .statements import statements_sent
from .test_worker_edges import Lines
from .waiting import wait_for
from .warm_start import run_manage


@pytest.fixture
def pair() -> Iterator[tuple[PostgresServer, Standby]]:
    """A primary and a streaming standby of it, started for this test."""
    try:
        primary = start_postgres()
    except PostgresNotFound as error:
        pytest.skip(str(error))
    with primary, start_standby(primary, config={"log_statement": "'all'"}) as standby:
        yield primary, standby


def test_standby_streams_and_is_promoted(pair: tuple[PostgresServer, Standby]) -> None:
    primary, standby = pair
    with psycopg.connect(primary.url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE seen (n int)")
        conn.execute("INSERT INTO seen VALUES (1)")
        flushed = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
    assert flushed is not None
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        assert conn.info.parameter_status("in_hot_standby") == "on"
        while conn.execute(
            "SELECT pg_last_wal_replay_lsn() < %s::pg_lsn", (flushed[0],)
        ).fetchone() != (False,):
            pass
        assert conn.execute("SELECT n FROM seen").fetchall() == [(1,)]
    standby.stop_primary("immediate")
    standby.promote()
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        assert conn.info.parameter_status("in_hot_standby") == "off"
        conn.execute("INSERT INTO seen VALUES (2)")


def test_synchronous_standby(pair: tuple[PostgresServer, Standby]) -> None:
    primary, _ = pair
    with (
        start_standby(primary, synchronous=True) as standby,
        psycopg.connect(primary.url(), autocommit=True) as conn,
    ):
        row = conn.execute(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
            (standby.name,),
        ).fetchone()
        assert row == ("sync",)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)


# -- a standby is not a lock database --------------------------------------------------------


def manage(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_manage(*args, env=manage_env(url), timeout=timeout)


def migrated_pair(*, logged: bool = True, **standby: Any) -> tuple[PostgresServer, Standby]:
    """A primary with the app's tables and a streaming standby (``standby``: the options of
    ``start_standby``); ``logged``, the standby logs every statement it receives (the first,
    sent here, shows that it does). The test skips where PostgreSQL is not found."""
    try:
        primary = start_postgres()
    except PostgresNotFound as error:
        pytest.skip(str(error))
    try:
        done = manage(primary.url(), "migrate", "--no-input", timeout=180)
        assert done.returncode == 0, done.stderr
        config = {"log_statement": "'all'"} if logged else None
        started = start_standby(primary, config=config, **standby)
    except BaseException:
        primary.stop()
        raise
    if logged:
        with psycopg.connect(started.url(), autocommit=True) as conn:
            conn.execute("SELECT 'logged'")
    return primary, started


@pytest.fixture(scope="module")
def migrated() -> Iterator[tuple[PostgresServer, Standby]]:
    """A migrated pair for this module's tests that leave it as it is."""
    primary, standby = migrated_pair()
    with primary, standby:
        yield primary, standby


def locks_asked(log: str) -> list[str]:
    """The statements in a server log that ask for an advisory lock (a call of one of the
    ``pg_*advisory*`` functions; not a write to the app's tables, whose names contain
    ``advisory_`` too: recording a lost run retries through the standby, which refuses it)."""
    assert "statement: SELECT 'logged'" in log, "the standby logs the statements it receives"
    return [
        line
        for line in log.splitlines()
        if "statement:" in line and re.search(r"\bpg_\w*advisory\w*\(", line)
    ]


def multi_host_url(*servers: PostgresServer, **options: str) -> str:
    """A libpq URL naming several servers, as a user writes it in DATABASE_URL."""
    hosts = ",".join(server.host for server in servers)
    ports = ",".join(str(server.port) for server in servers)
    query = "".join(f"&{name}={value}" for name, value in options.items())
    return f"postgresql://postgres@/postgres?host={hosts}&port={ports}{query}"


def test_runlocked_refuses_a_standby(migrated: tuple[PostgresServer, Standby]) -> None:
    _, standby = migrated
    result = manage(standby.url(), "runlocked", "sleepy", "0")
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{standby.host}:{standby.port}" in lines[0]
    assert "standby" in lines[0] and "took no lock" in lines[0]
    assert "target_session_attrs=read-write" in lines[0]
    assert locks_asked(standby.logfile.read_text()) == []


def test_cronworker_waits_for_the_standby_to_be_promoted() -> None:
    """A worker on ``host=primary,standby`` (no ``target_session_attrs``) loses its primary,
    reaches the standby, takes no lock and runs nothing there, says so at every attempt, and
    carries on once the standby is promoted."""
    primary, standby = migrated_pair()
    every_second = json.dumps({"JOBS_MODULE": "bench_worker_tasks"})
    env = {"ADVISORY_CRON_JSON": every_second, "BENCH_WORKER_JOBS": "1", "BENCH_WORKER_EVERY": "1"}
    with primary, standby:
        worker = subprocess.Popen(
            [sys.executable, str(MANAGE), "cronworker"],
            env=manage_env(multi_host_url(primary, standby), **env),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        try:
            lines = Lines(worker)
            wait_for(lambda: lines.times("scheduled job(s)"))  # scheduling, on the primary
            standby.stop_primary("immediate")
            said = wait_for(lambda: [line for _, line in lines.seen if "standby" in line][1:])
            before_promotion = standby.logfile.read_text()
            standby.promote()
            promoted = time.monotonic()
            back = wait_for(lambda: lines.times("database reachable again"))[0] - promoted
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == exitcodes.SIGTERM
        finally:
            if worker.poll() is None:
                worker.kill()
            lines.finish()
    for line in said:
        assert f"{standby.host}:{standby.port}" in line
        assert "took no lock" in line and "ran nothing" in line
    assert locks_asked(before_promotion) == []
    assert back < RECONNECT_PAUSES[-1] + 2, back  # the next attempt after the promotion


def test_check_warns_about_a_standby(migrated: tuple[PostgresServer, Standby]) -> None:
    primary, standby = migrated
    warned = manage(standby.url(), "check", "--database", "default")
    assert "django_advisory_cron.W013" in warned.stderr, warned
    assert f"{standby.host}:{standby.port}" in warned.stderr
    assert "W011" not in warned.stderr  # one warning about it, not a failed pooling probe too
    quiet = manage(primary.url(), "check", "--database", "default")
    assert quiet.returncode == 0 and "W013" not in quiet.stderr, quiet


def test_read_write_target_skips_the_standby(migrated: tuple[PostgresServer, Standby]) -> None:
    """The standby named first, the primary second: libpq moves on to the primary."""
    primary, standby = migrated
    url = multi_host_url(standby, primary, target_session_attrs="read-write")
    result = manage(url, "runlocked", "sleepy", "0")
    assert result.returncode == exitcodes.OK, result
    without = manage(multi_host_url(standby, primary), "runlocked", "sleepy", "0")
    assert without.returncode == exitcodes.DATABASE_UNAVAILABLE, without
    assert f":{standby.port}" in without.stderr and "standby" in without.stderr


def test_databases_entry_with_two_hosts(
    migrated: tuple[PostgresServer, Standby], django_db_blocker: Any
) -> None:
    """``DATABASES`` as a user writes it: ``HOST`` and ``PORT`` with two servers each."""
    primary, standby = migrated
    entry = {
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": f"{standby.host},{primary.host}",
        "PORT": f"{standby.port},{primary.port}",
    }
    with django_db_blocker.unblock():
        with database_alias("pair", **entry, OPTIONS={"target_session_attrs": "read-write"}):
            connection = open_lock_connection("pair")
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_is_in_recovery(), inet_server_port()")
                    assert cursor.fetchone() == (False, primary.port)
            finally:
                connection.close()
        with database_alias("pair", **entry), pytest.raises(ServerIsStandby) as refused:
            open_lock_connection("pair")
        assert f"{standby.host}:{standby.port}" in str(refused.value)


def test_the_standby_check_sends_no_statement(db_url: str) -> None:
    """The server says at login whether it is a standby: opening a lock connection sends
    nothing, so a normal ``runlocked`` pays no round trip for the check."""
    with statements_sent() as sent:
        connection = open_lock_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.close()
    assert [statement for _, statement in sent] == ["SELECT 1"]


@pytest.mark.pgbouncer
def test_a_promoted_server_behind_pgbouncer_is_not_refused(django_db_blocker: Any) -> None:
    """PgBouncer (1.18) hands every client the login parameters of its first server
    connection: after a promotion its clients are still told ``in_hot_standby = on``. The
    server is asked before a connection is refused."""
    if find_pgbouncer() is None:
        pytest.skip("pgbouncer binary not installed")
    primary, standby = migrated_pair()
    with primary, standby:
        server = Upstream(standby.host, standby.port, standby.user, standby.dbname)
        with (
            start_pgbouncer(server, pool_mode="session", pool_size=2) as bouncer,
            django_db_blocker.unblock(),
            database_alias("bounced", **bouncer.conninfo()),
        ):
            with pytest.raises(ServerIsStandby):
                open_lock_connection("bounced")
            kept = psycopg.connect(bouncer.url("postgres"), autocommit=True)
            standby.stop_primary("immediate")
            standby.promote()
            with psycopg.connect(bouncer.url("postgres"), autocommit=True) as told:
                assert told.info.parameter_status("in_hot_standby") == "on"  # stale
            connection = open_lock_connection("bounced")
            connection.close()
            kept.close()
