"""Send one of our statements on a Django connection, bounded by ``STATEMENT_TIMEOUT``.

The one way the package runs a single statement outside a lock's own round trips: the
connection is (re)opened if Django closed it, the answer must come within the deadline (else
[DatabaseUnavailable][django_advisory_cron.DatabaseUnavailable], and the connection is cut),
and the rows come back as plain tuples.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from . import sql
from .aliases import lock_database
from .connections import answer_within, ensure_connected


def fetch_all(
    connection: BaseDatabaseWrapper | str, statement: sql.Statement
) -> list[tuple[Any, ...]]:
    """Every row ``statement`` returns (none for a statement that returns no rows)."""
    wrapper = connections[connection] if isinstance(connection, str) else connection
    ensure_connected(wrapper)
    text, params = statement
    with answer_within(wrapper, app_settings.STATEMENT_TIMEOUT), wrapper.cursor() as cursor:
        cursor.execute(text, params)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


def fetch_one(
    connection: BaseDatabaseWrapper | str, statement: sql.Statement
) -> tuple[Any, ...] | None:
    """The first row ``statement`` returns, or None."""
    rows = fetch_all(connection, statement)
    return rows[0] if rows else None


def database_now(using: str | None = None) -> datetime:
    """The database server's clock: ticks and pauses are judged on it, never on a host's."""
    row = fetch_one(lock_database(using), sql.database_now())
    assert row is not None and isinstance(row[0], datetime)
    return row[0]
