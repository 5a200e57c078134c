"""advisory_lock(): session and transaction scope, waiting, and misuse."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from django_advisory_cron import LockDatabaseError, LockScopeError, advisory_lock
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.core.scopes import Scope
from tests.pglocks import holders

pytestmark = pytest.mark.usefixtures("transactional_db")


def held(observer, name: str) -> int:
    return len(holders(observer, LockKey(name)))


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_second_taker_is_refused_until_release(raw_connect, scope: Scope) -> None:
    observer = raw_connect()
    with advisory_lock("job-a", scope=scope) as first:
        assert first.acquired and bool(first)
        assert first.scope == scope
        assert held(observer, "job-a") == 1
        # A different process would use another connection: a thread has its own.
        outcome: list[bool] = []

        def other() -> None:
            with advisory_lock("job-a", scope=scope) as second:
                outcome.append(second.acquired)
            connection.close()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert outcome == [False]
    assert held(observer, "job-a") == 0


def test_session_lock_lives_on_its_own_connection(raw_connect) -> None:
    """The body's ORM connection is not the lock connection."""
    with advisory_lock("job-b", scope="session") as lock:
        assert lock.connection is not None
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            body_pid = cursor.fetchone()[0]
        row = lock.send(("SELECT pg_backend_pid()", {}))
        assert row is not None
        lock_pid = row[0]
        assert body_pid != lock_pid


def test_transaction_scope_runs_the_body_in_the_lock_transaction() -> None:
    with advisory_lock("job-c", scope="transaction") as lock:
        assert lock.acquired
        assert connection.in_atomic_block
    assert not connection.in_atomic_block


def test_transaction_scope_refuses_an_outer_atomic_block() -> None:
    with (
        transaction.atomic(),
        pytest.raises(LockScopeError, match="outer atomic"),
        advisory_lock("job-d", scope="transaction"),
    ):
        pass


def test_transaction_lock_released_on_rollback(raw_connect) -> None:
    observer = raw_connect()
    seen_while_held: list[int] = []
    with pytest.raises(ZeroDivisionError):
        failing_body(observer, seen_while_held)
    assert seen_while_held == [1]
    assert held(observer, "job-e") == 0


def failing_body(observer, seen: list[int]) -> None:
    with advisory_lock("job-e", scope="transaction"):
        seen.append(held(observer, "job-e"))
        raise ZeroDivisionError


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_wait_acquires_once_the_holder_finishes(raw_connect, scope: Scope) -> None:
    holder = raw_connect()
    ids = LockKey("job-f").params
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", ids)
    release = threading.Timer(
        0.5, lambda: holder.execute("SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", ids)
    )
    release.start()
    started = time.monotonic()
    with advisory_lock("job-f", scope=scope, wait=10) as lock:
        waited = time.monotonic() - started
        assert lock.acquired
    release.join()
    assert 0.4 < waited < 5


def test_wait_gives_up_after_the_deadline(raw_connect) -> None:
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("job-g").params)
    started = time.monotonic()
    with advisory_lock("job-g", scope="session", wait=0.6) as lock:
        assert not lock.acquired
    assert 0.55 < time.monotonic() - started < 3


def test_non_postgresql_alias_is_refused() -> None:
    with (
        pytest.raises(LockDatabaseError, match="need PostgreSQL"),
        advisory_lock("job-h", scope="session", using="sqlite"),
    ):
        pass


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="scope"):
        advisory_lock("x", scope="forever")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="wait"):
        advisory_lock("x", wait=-1)
