"""A standby is not a lock database: a real primary and a streaming standby on loopback.

Advisory locks work on a hot standby, so a lock taken there would exclude nobody on the
primary: ``runlocked`` and ``cronworker`` refuse a standby at connect time, and a system check
warns about it. A multi-host connection string with ``target_session_attrs=read-write`` makes
libpq skip the standby. Each test module starts its own pair, not the shared test cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from django_advisory_cron.testing import (
    PostgresNotFound,
    PostgresServer,
    Standby,
    start_postgres,
    start_standby,
)


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
