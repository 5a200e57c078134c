"""Pooling detection: static signals and the live probes, each against a direct connection,
a real PgBouncer in session mode and a real PgBouncer in transaction mode."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from django.core import checks
from django.test import Client, override_settings
from django.urls import reverse

from django_advisory_cron import registry
from django_advisory_cron.checks import pooling as pooler_checks
from django_advisory_cron.db import pooler
from django_advisory_cron.db.pooler import resolve_scope
from django_advisory_cron.testing import PgBouncer, start_pgbouncer
from django_advisory_cron.testing.postgres import free_port

from .pglocks import holders
from .pooling import bouncer_entry, bouncer_url, database_alias, server_url, upstream

pytestmark = pytest.mark.usefixtures("transactional_db")

LOCKS_URL = reverse("admin:django_advisory_cron_heldlock_changelist")


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return sorted(str(message.id) for message in messages)


# -- static signals -------------------------------------------------------------------------


def test_static_signals() -> None:
    with database_alias("plain"):
        assert pooler.static_pooling("plain")[0] is None
        assert resolve_scope("auto", "plain") == "session"
    with database_alias("port6432", PORT="6432"):
        mode, reason = pooler.static_pooling("port6432")
        assert mode == "transaction" and "6432" in reason
        assert resolve_scope("auto", "port6432") == "transaction"
    with database_alias("nocursors", DISABLE_SERVER_SIDE_CURSORS=True):
        assert pooler.static_pooling("nocursors")[0] == "transaction"
    with database_alias("declared", PORT="6432"):
        with override_settings(ADVISORY_CRON={"POOLING": "none"}):
            assert pooler.static_pooling("declared") == ("none", "ADVISORY_CRON['POOLING'] says so")
            assert resolve_scope("auto", "declared") == "session"
        with override_settings(ADVISORY_CRON={"POOLING": "statement"}):
            assert pooler.is_transaction_pooled("declared")


# -- the live probes in the three set-ups ---------------------------------------------------


def test_probe_direct_connection(raw_connect: Any) -> None:
    result = pooler.probe("default", refresh=True)
    assert result.ok, result.error
    assert result.mode == "none"
    assert result.pooler is False
    assert result.startup_pid == result.server_pid
    assert result.lock_outlived_client is False
    # Cheap: two connections, one query each (the lock is gone at the first look).
    assert result.connections == 2
    assert result.queries <= 3
    assert result.elapsed_ms < 1000
    # Nothing is left behind on the server (by this probe: a probe through a transaction
    # pooler earlier in this test process leaves its shared lock on that pooler's backends).
    assert result.server_pid not in holders(raw_connect(), pooler.probe_key(), "ShareLock")


@pytest.mark.pgbouncer
def test_probe_pgbouncer_session_mode(pgbouncer_session: PgBouncer, raw_connect: Any) -> None:
    with database_alias("bouncer_session", **bouncer_entry(pgbouncer_session)):
        result = pooler.probe("bouncer_session", refresh=True)
        assert result.ok, result.error
        assert result.mode == "session"
        assert result.pooler is True
        assert result.startup_pid != result.server_pid
        assert result.lock_outlived_client is False
        assert result.connections == 2 and result.queries <= 3
        assert result.elapsed_ms < 1000
        # A pooler is in the path: auto takes transaction scope, safe under every mode.
        assert resolve_scope("auto", "bouncer_session") == "transaction"
    # DISCARD ALL at the end of the client session released the probe's shared lock.
    assert result.server_pid not in holders(raw_connect(), pooler.probe_key(), "ShareLock")


@pytest.mark.pgbouncer
def test_probe_pgbouncer_transaction_mode(
    pgbouncer_transaction: PgBouncer, raw_connect: Any
) -> None:
    with database_alias("bouncer_tx", **bouncer_entry(pgbouncer_transaction)):
        assert pooler.static_pooling("bouncer_tx")[0] is None  # nothing in the settings
        # Without any probe, the start-up PID shows a pooler in the path: transaction scope.
        assert pooler.cached_probe("bouncer_tx") is None
        assert resolve_scope("auto", "bouncer_tx") == "transaction"
        result = pooler.probe("bouncer_tx", refresh=True)
        assert result.ok, result.error
        assert result.mode == "transaction"
        assert result.pooler is True
        assert result.startup_pid != result.server_pid
        assert result.lock_outlived_client is True
        # The probe's shared lock really is still held by that server backend.
        assert result.server_pid in holders(raw_connect(), pooler.probe_key(), "ShareLock")
        # Two connections, at most six polls; bounded by the one-second window.
        assert result.connections == 2 and result.queries <= 7
        assert 900 <= result.elapsed_ms < 2500
        # Now cached: auto resolves to transaction scope without another probe.
        assert pooler.cached_probe("bouncer_tx") == result
        assert pooler.is_transaction_pooled("bouncer_tx")
        assert resolve_scope("auto", "bouncer_tx") == "transaction"
        assert pooler.pooling("bouncer_tx")[1].startswith("live probe")
        # A declared mode still wins over the probe.
        with override_settings(ADVISORY_CRON={"POOLING": "none"}):
            assert resolve_scope("auto", "bouncer_tx") == "session"


@pytest.mark.pgbouncer
def test_the_lock_a_probe_leaves_on_a_pooled_connection_is_named_and_never_stale(
    pgbouncer_transaction: PgBouncer, admin_client: Client
) -> None:
    """Under transaction pooling the probe's shared lock stays on the server connection by
    design; the held-locks page said "unknown job (not registered here)" for it and, once it
    was older than STALE_AFTER, STALE: an operator was sent after a lock nothing can free."""
    with database_alias("bouncer_tx", **bouncer_entry(pgbouncer_transaction)):
        result = pooler.probe("bouncer_tx", refresh=True)
    assert result.lock_outlived_client
    with override_settings(ADVISORY_CRON={"STALE_AFTER": 0.001}):
        body = admin_client.get(LOCKS_URL).content.decode()
        stale = admin_client.get(LOCKS_URL, {"stale": "yes"}).content.decode()
    assert "pooling probe" in body
    assert "unknown job" not in body
    assert "pooling probe" not in stale


@pytest.mark.pgbouncer
def test_probe_statement_mode_counts_as_transaction(
    postgres_server: Any, django_db_setup: None
) -> None:
    server = upstream()
    with (
        start_pgbouncer(server, pool_mode="statement", pool_size=2) as bouncer,
        database_alias("bouncer_stmt", **bouncer_entry(bouncer)),
    ):
        result = pooler.probe("bouncer_stmt", refresh=True)
        assert result.mode == "transaction" and result.lock_outlived_client is True


@pytest.mark.pgbouncer
def test_probe_session_mode_without_reset_query_is_the_hazard(django_db_setup: None) -> None:
    """Session pooling with an empty reset query leaks session locks too; the probe says so."""
    with (
        start_pgbouncer(
            upstream(), pool_mode="session", pool_size=2, server_reset_query=""
        ) as bouncer,
        database_alias("bouncer_noreset", **bouncer_entry(bouncer)),
    ):
        result = pooler.probe("bouncer_noreset", refresh=True)
        assert result.pooler is True
        assert result.mode == "transaction" and result.lock_outlived_client is True


# -- never crash, never hang ----------------------------------------------------------------


def test_probe_database_down_is_a_result_not_an_exception() -> None:
    with database_alias("nowhere", HOST="127.0.0.1", PORT=str(free_port())):
        result = pooler.probe("nowhere", timeout=2)
        assert not result.ok and result.mode is None
        assert "refused" in result.error.lower() or "failed" in result.error.lower()
        assert result.elapsed_ms < 2500
        assert pooler.cached_probe("nowhere") is None  # failures are not cached


@pytest.mark.pgbouncer
def test_probe_times_out_when_the_pool_is_exhausted(pgbouncer_session: PgBouncer) -> None:
    """Session mode, pool of 3 taken by 3 clients: the probe waits in PgBouncer's queue."""
    busy = [psycopg.connect(bouncer_url(pgbouncer_session), autocommit=True) for _ in range(3)]
    try:
        for client in busy:
            client.execute("SELECT 1")
        with database_alias("bouncer_full", **bouncer_entry(pgbouncer_session)):
            result = pooler.probe("bouncer_full", timeout=1.5)
            assert not result.ok and result.mode is None
            assert "no answer within 1.5 s" in result.error
            assert 1400 <= result.elapsed_ms < 3000
            # The live system check turns it into a warning instead of a crash or a hang.
            with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "bouncer_full"}):
                messages = pooler_checks.check_pooling_live(databases=["bouncer_full"])
            assert ids(messages) == ["django_advisory_cron.W011"]
    finally:
        for client in busy:
            client.close()


def test_probe_refuses_a_non_postgresql_alias() -> None:
    result = pooler.probe("sqlite")
    assert not result.ok and "not PostgreSQL" in result.error


def test_probe_is_cached_per_alias_and_thread_safe() -> None:
    pooler.clear_cache()
    results: list[pooler.ProbeResult] = []

    def run() -> None:
        results.append(pooler.probe("default"))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {result.mode for result in results} == {"none"}
    cached = pooler.cached_probe("default")
    assert cached is not None
    assert pooler.probe("default") is cached  # no new probe
    assert pooler.probe("default", refresh=True) is not cached


def test_probe_ignores_djangos_pool_option() -> None:
    pytest.importorskip("psycopg_pool")
    with database_alias("pooled", OPTIONS={"pool": {"min_size": 1, "max_size": 2}}):
        assert "pool" not in pooler.connect_params("pooled")
        assert pooler.probe("pooled", refresh=True).mode == "none"


# -- system checks ----------------------------------------------------------------------------


def test_static_check_warns_about_session_jobs_on_a_pooled_looking_alias(
    fresh_registry: None,
) -> None:
    from django_advisory_cron import locked_task

    @locked_task(name="pooling-session-job", scope="session")
    def session_job() -> None: ...

    @locked_task(name="pooling-auto-job")
    def auto_job() -> None: ...

    with override_settings(ADVISORY_CRON={"POOLING": "transaction"}):
        messages = pooler_checks.check_pooling_static()
    assert ids(messages) == ["django_advisory_cron.W010"]
    assert "pooling-session-job" in messages[0].msg
    assert "pooling-auto-job" not in messages[0].msg  # auto resolves to transaction here
    assert "scope='transaction'" in str(messages[0].hint)
    assert "LOCK_DATABASE" in str(messages[0].hint)
    assert pooler_checks.check_pooling_static() == []  # direct: nothing to say


def test_static_check_prepared_statements() -> None:
    options = {"server_side_binding": True, "prepare_threshold": 5}
    with (
        database_alias("prepared", PORT="6432", OPTIONS=options),
        override_settings(ADVISORY_CRON={"LOCK_DATABASE": "prepared"}),
    ):
        messages = pooler_checks.check_pooling_static()
    assert ids(messages) == ["django_advisory_cron.W012"]
    assert "DuplicatePreparedStatement" in str(messages[0].hint)
    # Django's default (prepared statements off) is fine behind any pooler.
    with (
        database_alias("unprepared", PORT="6432"),
        override_settings(ADVISORY_CRON={"LOCK_DATABASE": "unprepared"}),
    ):
        assert pooler_checks.check_pooling_static() == []


def test_static_check_reserved_probe_key(fresh_registry: None) -> None:
    from django_advisory_cron import locked_task

    @locked_task(name=pooler.PROBE_NAME)
    def squatter() -> None: ...

    assert "django_advisory_cron.E011" in ids(pooler_checks.check_pooling_static())


@pytest.mark.pgbouncer
def test_live_check_in_the_three_setups(
    pgbouncer_session: PgBouncer, pgbouncer_transaction: PgBouncer, fresh_registry: None
) -> None:
    from django_advisory_cron import locked_task

    @locked_task(name="pooling-live-auto")
    def live_auto() -> None: ...

    @locked_task(name="pooling-live-session", scope="session")
    def live_session() -> None: ...

    assert pooler_checks.check_pooling_live(databases=["default"]) == []
    assert pooler_checks.check_pooling_live(databases=None) == []  # not asked: no probe
    with (
        database_alias("live_session", **bouncer_entry(pgbouncer_session)),
        override_settings(ADVISORY_CRON={"LOCK_DATABASE": "live_session"}),
    ):
        assert pooler_checks.check_pooling_live(databases=["live_session"]) == []
    with database_alias("live_tx", **bouncer_entry(pgbouncer_transaction)):
        with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "live_tx"}):
            messages = pooler_checks.check_pooling_live(databases=["live_tx"])
            # Only the job that asks for session scope is at risk: auto detects the pooler.
            assert ids(messages) == ["django_advisory_cron.E010"]
            assert "pooling-live-session" in messages[0].msg
            assert "pooling-live-auto" not in messages[0].msg
        with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "live_tx", "POOLING": "none"}):
            # A wrong declaration wins over detection: auto would take session locks.
            messages = pooler_checks.check_pooling_live(databases=["live_tx"])
            assert ids(messages) == ["django_advisory_cron.E010", "django_advisory_cron.E012"]
            (wrong,) = [m for m in messages if m.id == "django_advisory_cron.E012"]
            assert "pooling-live-auto" in wrong.msg
        registry.unregister("pooling-live-session")
        with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "live_tx"}):
            assert pooler_checks.check_pooling_live(databases=["live_tx"]) == []


@pytest.mark.pgbouncer
def test_manage_py_check_database_through_each_setup(
    manage: Any, pgbouncer_session: PgBouncer, pgbouncer_transaction: PgBouncer
) -> None:
    """``manage.py check --database default`` in a real subprocess, as a deploy would run it."""
    direct = manage("check", "--database", "default", url=server_url())
    assert direct.returncode == 0, direct.stderr
    assert "E010" not in direct.stderr + direct.stdout
    session = manage("check", "--database", "default", url=bouncer_url(pgbouncer_session))
    assert session.returncode == 0, session.stderr
    assert "E010" not in session.stderr + session.stdout
    # Behind transaction pooling, scope='auto' detects the pooler: nothing blocks the deploy.
    pooled = manage("check", "--database", "default", url=bouncer_url(pgbouncer_transaction))
    assert pooled.returncode == 0, pooled.stderr
    assert "E010" not in pooled.stderr + pooled.stdout
    migrated = manage("migrate", url=bouncer_url(pgbouncer_transaction))
    assert migrated.returncode == 0, migrated.stderr
    # Without --database the live probe does not run.
    plain = manage("check", url=bouncer_url(pgbouncer_transaction))
    assert plain.returncode == 0 and "E010" not in plain.stderr + plain.stdout
    # A database that is down is a warning, not a crash.
    down = manage(
        "check", "--database", "default", url=f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    )
    assert down.returncode == 0, down.stderr
    assert "django_advisory_cron.W011" in down.stderr + down.stdout
