"""Connections we open, and bounds on how long they may keep us waiting.

A session lock lives as long as its server connection. Django's pool (``OPTIONS["pool"]``)
only returns a closed connection to the pool, so the lock would stay held by that backend:
the lock connection is therefore built from a copy of the alias's settings without ``pool``,
outside Django's connection handler, with TCP keepalives so a dead peer is noticed, and a
connect timeout so a server that accepts TCP and never answers cannot hang a cron job.

Our own statements get a client-side deadline (``answer_within()``): a pooler queue or a
silent network can otherwise stall them for minutes.
"""

from __future__ import annotations

import copy
import math
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from .conf import app_settings
from .deadlines import watchdog
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
    """A one-line ``DatabaseUnavailable`` for a failed connection attempt."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return DatabaseUnavailable(
        f"cannot reach PostgreSQL at {describe_server(alias)} (alias {alias!r}): {first_line}"
    )


def ensure_connected(connection: BaseDatabaseWrapper) -> None:
    """Connect, turning a failure into
    [DatabaseUnavailable][django_advisory_cron.exceptions.DatabaseUnavailable].

    Bounded in time: the connect timeout covers the login, and a deadline the queries Django
    sends right after it (a pooler may accept the login, then queue those for minutes).
    """
    if connection.connection is not None:
        return
    deadline = connect_timeout() + app_settings.STATEMENT_TIMEOUT
    try:
        with answer_within(connection, deadline):
            connection.ensure_connection()
    except OperationalError as error:
        connection.close()
        raise unavailable(connection.alias, error) from error
    except DatabaseUnavailable:
        connection.close()
        raise


def connect_timeout() -> int:
    """``CONNECT_TIMEOUT`` as libpq takes it: whole seconds, at least 2 (libpq's minimum)."""
    return max(2, math.ceil(app_settings.CONNECT_TIMEOUT))


def bound_connect(alias: str) -> None:
    """Give Django's own connection for ``alias`` our connect timeout, unless its OPTIONS set
    one. For processes this app owns (``runlocked``), before their first query."""
    options = require_postgresql(alias).settings_dict.setdefault("OPTIONS", {})
    options.setdefault("connect_timeout", connect_timeout())


def unpooled_connection(alias: str, **options: object) -> BaseDatabaseWrapper:
    """A new autocommit connection (not yet connected) from a copy of the alias's settings,
    without Django's pool, with keepalives and a connect timeout; ``options`` add connection
    parameters (the alias's own OPTIONS win)."""
    base = require_postgresql(alias)
    settings_dict = copy.deepcopy(base.settings_dict)
    merged = settings_dict.setdefault("OPTIONS", {})
    merged.pop("pool", None)
    defaults = {
        **KEEPALIVES,
        "application_name": APPLICATION_NAME,
        "connect_timeout": connect_timeout(),
        **options,
    }
    for name, value in defaults.items():
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


def _cut(connection: BaseDatabaseWrapper) -> None:
    """Shut the connection's socket down under the thread waiting on it: its read returns at
    once and the driver raises. Closing the connection from another thread is not safe."""
    raw: Any = connection.connection
    if raw is None:
        return
    try:
        duplicate = socket.socket(fileno=os.dup(raw.fileno()))
    except (OSError, ValueError, AttributeError):
        return
    try:
        duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        duplicate.close()


@contextmanager
def answer_within(connection: BaseDatabaseWrapper, seconds: float) -> Iterator[None]:
    """Raise ``DatabaseUnavailable`` if the block's statements get no answer in time.

    On time-out the connection is cut (see ``_cut()``) and unusable afterwards; for a lock
    connection that also ends the lock, as a dead network would.
    """
    deadline = watchdog.arm(seconds, lambda: _cut(connection))
    try:
        yield
    except DatabaseError as error:
        if watchdog.disarm(deadline):
            raise DatabaseUnavailable(
                f"no answer from PostgreSQL at {describe_server(connection.alias)} "
                f"(alias {connection.alias!r}) within {seconds:g} s"
            ) from error
        raise
    finally:
        watchdog.disarm(deadline)
