"""Connections that hold session locks.

A session lock lives as long as its server connection. Django's pool (``OPTIONS["pool"]``)
only returns a closed connection to the pool, so the lock would stay held by that backend:
the lock connection is therefore built from a copy of the alias's settings without ``pool``,
outside Django's connection handler, with TCP keepalives so a dead peer is noticed.
"""

from __future__ import annotations

import copy

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from .exceptions import DatabaseUnavailable, LockDatabaseError

APPLICATION_NAME = "django-advisory-cron"

KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def require_postgresql(alias: str) -> BaseDatabaseWrapper:
    """Return Django's connection for ``alias``, refusing anything but PostgreSQL."""
    if alias not in connections.settings:
        raise LockDatabaseError(f"database alias {alias!r} is not in DATABASES")
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise LockDatabaseError(
            f"database alias {alias!r} uses the {connection.vendor!r} backend; advisory locks "
            "need PostgreSQL (set ADVISORY_CRON['LOCK_DATABASE'] to a PostgreSQL alias)"
        )
    return connection


def describe_server(alias: str) -> str:
    """``host:port/name`` of an alias, for one-line error messages."""
    settings_dict = connections[alias].settings_dict
    host = settings_dict.get("HOST") or "local socket"
    port = settings_dict.get("PORT") or "5432"
    return f"{host}:{port}/{settings_dict.get('NAME') or ''}"


def unavailable(alias: str, error: BaseException) -> DatabaseUnavailable:
    """A one-line :class:`DatabaseUnavailable` for a failed connection attempt."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return DatabaseUnavailable(
        f"cannot reach PostgreSQL at {describe_server(alias)} (alias {alias!r}): {first_line}"
    )


def ensure_connected(connection: BaseDatabaseWrapper) -> None:
    """Connect, turning a connection failure into :class:`DatabaseUnavailable`."""
    try:
        connection.ensure_connection()
    except OperationalError as error:
        raise unavailable(connection.alias, error) from error


def unpooled_connection(alias: str, **options: object) -> BaseDatabaseWrapper:
    """A new autocommit connection (not yet connected) from a copy of the alias's settings,
    without Django's pool, with keepalives; ``options`` add connection parameters."""
    base = require_postgresql(alias)
    settings_dict = copy.deepcopy(base.settings_dict)
    merged = settings_dict.setdefault("OPTIONS", {})
    merged.pop("pool", None)
    for name, value in {**KEEPALIVES, "application_name": APPLICATION_NAME, **options}.items():
        merged.setdefault(name, value)
    settings_dict["CONN_MAX_AGE"] = 0
    settings_dict["AUTOCOMMIT"] = True
    backend = load_backend(settings_dict["ENGINE"])
    connection: BaseDatabaseWrapper = backend.DatabaseWrapper(settings_dict, alias)
    return connection


def open_lock_connection(alias: str = DEFAULT_DB_ALIAS) -> BaseDatabaseWrapper:
    """Open a dedicated, unpooled autocommit connection for holding session locks."""
    connection = unpooled_connection(alias)
    # The heartbeat thread checks this connection while the job runs elsewhere.
    connection.inc_thread_sharing()
    ensure_connected(connection)
    return connection
