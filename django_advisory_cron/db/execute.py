"""Send one of our statements, bounded by a deadline: the one way the package runs one.

On a Django connection ([fetch_all][django_advisory_cron.db.execute.fetch_all]): the
connection is (re)opened if Django closed it, the answer must come within
``STATEMENT_TIMEOUT`` (else [DatabaseUnavailable][django_advisory_cron.DatabaseUnavailable],
and the connection is cut), and the rows come back as plain tuples. On a lock connection
([rows_within][django_advisory_cron.db.execute.rows_within]): as it is, never reconnected. On
a fresh connection ([execute_fresh][django_advisory_cron.db.execute.execute_fresh]): for
recording once a lock connection is gone, retried through a restart. In a transaction of ours
on a Django connection ([send_between][django_advisory_cron.db.execute.send_between]): in one
round trip with the savepoint statements around it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime
from typing import Any

from django.db import DatabaseError, InterfaceError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from . import sql
from .aliases import lock_database
from .connections import (
    answer_within,
    ensure_connected,
    pipelined,
    refused_value,
    unpooled_connection,
)

logger = logging.getLogger("django_advisory_cron")

Row = tuple[Any, ...]


def fetch_all(connection: BaseDatabaseWrapper | str, statement: sql.Statement) -> list[Row]:
    """Every row ``statement`` returns (none for a statement that returns no rows)."""
    wrapper = connections[connection] if isinstance(connection, str) else connection
    ensure_connected(wrapper)
    text, params = statement
    with answer_within(wrapper, app_settings.STATEMENT_TIMEOUT), wrapper.cursor() as cursor:
        cursor.execute(text, params)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


def fetch_one(connection: BaseDatabaseWrapper | str, statement: sql.Statement) -> Row | None:
    """The first row ``statement`` returns, or None."""
    rows = fetch_all(connection, statement)
    return rows[0] if rows else None


def database_now(using: str | None = None) -> datetime:
    """The database server's clock: ticks and pauses are judged on it, never on a host's."""
    row = fetch_one(lock_database(using), sql.database_now())
    assert row is not None and isinstance(row[0], datetime)
    return row[0]


def rows_within(
    connection: BaseDatabaseWrapper, statement: sql.Statement, deadline: float
) -> list[Row]:
    """Run one of our statements on a lock connection as it is (never reconnected: a new
    backend would not hold the lock), answered within ``deadline`` seconds; its rows.

    It goes through the driver's own cursor: the connection is this lock's alone, so Django's
    cursor layer (execute wrappers, query logging, reconnecting) has nothing to do there and
    would cost about a tenth of a millisecond per statement; errors are still Django's."""
    sql_text, params = statement
    raw: Any = connection.connection
    if raw is None:
        raise InterfaceError(f"{connection.alias!r}: the lock connection is closed")
    with answer_within(connection, deadline), connection.wrap_database_errors:
        cursor = raw.cursor()
        try:
            cursor.execute(sql_text, params)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        finally:
            cursor.close()


def _nothing(*_: object) -> None:
    pass


def send_between(
    connection: BaseDatabaseWrapper,
    statement: sql.Statement | None,
    *,
    before: Callable[[], object] = _nothing,
    after: Callable[[], object] = _nothing,
    failed: Callable[[BaseException], object] = _nothing,
) -> Row | None:
    """Run one of our statements on a Django connection, in one round trip with what
    ``before`` and ``after`` send there (a savepoint's end, its start:
    [pipelined][django_advisory_cron.db.connections.pipelined], where the driver can), answered
    within ``STATEMENT_TIMEOUT``; its first row. ``failed`` hears what the round trip raised,
    within the deadline, before it is raised. With no ``statement``, only what ``before`` and
    ``after`` send goes."""
    with answer_within(connection, app_settings.STATEMENT_TIMEOUT), ExitStack() as cursors:
        cursor = None
        try:
            with pipelined(connection):
                before()
                if statement is not None:
                    cursor = cursors.enter_context(connection.cursor())
                    cursor.execute(*statement)
                after()
        except BaseException as error:
            failed(error)
            raise
        row = cursor.fetchone() if cursor is not None and cursor.description else None
    return None if row is None else tuple(row)


def execute_fresh(alias: str, statement: sql.Statement, *, patience: float) -> bool:
    """Run one statement on a fresh, short-lived connection, retrying for ``patience`` s
    (e.g. through a restart). Returns whether it succeeded; failures are logged, not raised."""
    return _on_fresh(alias, statement, patience)[0]


def fetch_fresh(alias: str, statement: sql.Statement, *, patience: float) -> Row | None:
    """Like [execute_fresh][django_advisory_cron.db.execute.execute_fresh], returning the
    statement's first row (``None`` when it returned none, or failed)."""
    return _on_fresh(alias, statement, patience)[1]


def _on_fresh(alias: str, statement: sql.Statement, patience: float) -> tuple[bool, Row | None]:
    sql_text, params = statement
    deadline = time.monotonic() + patience
    delay = 0.2
    while True:
        connection = unpooled_connection(alias)
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql_text, params)
                row = cursor.fetchone() if cursor.description else None
            return True, None if row is None else tuple(row)
        except (DatabaseError, ValueError) as error:
            # A refused value is refused again: no retry.
            if refused_value(error) or time.monotonic() + delay > deadline:
                logger.error("could not record on %r: %s", alias, error)
                return False, None
        finally:
            connection.close()
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
