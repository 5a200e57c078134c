"""Connections we open, and bounds on how long they may keep us waiting.

A session lock lives as long as its server connection. Django's pool (``OPTIONS["pool"]``)
only returns a closed connection to the pool, so the lock would stay held by that backend:
the lock connection is therefore built from a copy of the alias's settings without ``pool``,
outside Django's connection handler, with TCP keepalives so a dead peer is noticed, and a
connect timeout so a server that accepts TCP and never answers cannot hang a cron job.

Our own statements get a client-side deadline (``answer_within()``): a pooler queue or a
silent network can otherwise stall them for minutes.

Lock connections are kept warm: opening one forks a server backend (milliseconds), so each
process keeps a few idle ones per alias ([checkout][django_advisory_cron.db.connections.checkout],
[checkin][django_advisory_cron.db.connections.checkin]). A connection serves one holder at a time (a
session lock is re-entrant within its session, so two holders on one connection would both
"hold" the same key), goes back only when it provably holds nothing, is closed once older than
``LOCK_CONNECTION_MAX_AGE``, and is never used by a process other than the one that opened it
(after ``fork()`` the child opens its own and leaves the parent's sockets alone).
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import DEFAULT_DB_ALIAS, DatabaseError, DataError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.psycopg_any import is_psycopg3
from django.db.utils import load_backend

from ..conf import app_settings
from ..exceptions import (
    DatabaseReadOnly,
    DatabaseUnavailable,
    LockDatabaseError,
    ServerIsStandby,
    first_line,
)
from . import sql
from .deadlines import Deadline, watchdog

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
    return DatabaseUnavailable(
        f"cannot reach PostgreSQL at {describe_server(alias)} (alias {alias!r}): "
        f"{first_line(error)}"
    )


#: SQLSTATE ``read_only_sql_transaction``: a write refused because the transaction is read-only.
READ_ONLY_SQLSTATE = "25006"


def read_only(error: BaseException) -> bool:
    """Whether ``error`` (or what it was raised from) is a write refused because the server,
    or the database's default, makes every transaction read-only."""
    cause: BaseException | None = error
    while cause is not None:
        code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
        if code == READ_ONLY_SQLSTATE:
            return True
        cause = cause.__cause__
    return False


def refusing_writes(alias: str | None) -> DatabaseReadOnly:
    """The one-line error for a database that refused one of our writes as read-only."""
    at = f" at {describe_server(alias)} (alias {alias!r})" if alias else ""
    return DatabaseReadOnly(
        f"the database{at} is read-only: it refuses writes (default_transaction_read_only is "
        "on, or the server was switched to read-only)"
    )


def refused_value(error: BaseException) -> bool:
    """Whether a statement failed for a value it carried (a text the database's encoding
    cannot hold, one the driver cannot encode): nothing of it ran, and its connection is as
    it was. Never a sign that the connection, or a lock it holds, is gone."""
    return isinstance(error, (DataError, ValueError))


def ensure_connected(connection: BaseDatabaseWrapper) -> None:
    """Connect, turning a failure into
    [DatabaseUnavailable][django_advisory_cron.exceptions.DatabaseUnavailable], and a standby
    into [ServerIsStandby][django_advisory_cron.exceptions.ServerIsStandby].

    Bounded in time: the connect timeout covers the login, and a deadline the queries Django
    sends right after it (a pooler may accept the login, then queue those for minutes).
    """
    if connection.connection is not None:
        return
    deadline = connect_timeout() + app_settings.STATEMENT_TIMEOUT
    try:
        with answer_within(connection, deadline):
            connection.ensure_connection()
            refuse_standby(connection)
    except OperationalError as error:
        connection.close()
        raise unavailable(connection.alias, error) from error
    except DatabaseUnavailable:
        connection.close()
        raise


def standby_at(connection: BaseDatabaseWrapper) -> str | None:
    """``host:port`` of the server ``connection`` reached, when it is a hot standby; else None.

    The server says so at login (its ``in_hot_standby`` parameter, PostgreSQL 14 and later),
    so a primary costs no round trip. A login that says "standby" is confirmed by asking the
    server: PgBouncer gives every client the login parameters of its first server
    connection, which may be from before a promotion. A pooler that does not pass the
    parameter on hides a standby."""
    info: Any = getattr(connection.connection, "info", None)
    if info is None or info.parameter_status("in_hot_standby") != "on":
        return None
    text, params = sql.in_recovery()
    with connection.cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    return f"{info.host}:{info.port}" if row is not None and row[0] else None


def refuse_standby(connection: BaseDatabaseWrapper) -> None:
    """Raise ``ServerIsStandby`` when the server just connected to is a hot standby: advisory
    locks work there, and a lock taken there would exclude nobody on the primary."""
    server = standby_at(connection)
    if server is None:
        return
    raise ServerIsStandby(
        f"PostgreSQL at {server} (alias {connection.alias!r}) is a standby (in recovery, "
        "read-only): took no lock there, since a lock on a standby excludes nobody on the "
        "primary; point the alias at the primary, or list every server in HOST and PORT with "
        "OPTIONS target_session_attrs=read-write so that libpq skips standbys"
    )


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


#: A lock connection prepares a statement on its second execution (psycopg's
#: ``prepare_threshold``): one sent only once is not kept on the server.
PREPARE_THRESHOLD = 1

#: How a lock connection sends parameters: bound on the server and prepared on a statement's
#: second run; bound on the server, never prepared; or bound on the client, as Django does.
Binding = Literal["prepared", "server", "client"]


def open_lock_connection(
    alias: str = DEFAULT_DB_ALIAS, *, binding: Binding = "prepared", **options: object
) -> BaseDatabaseWrapper:
    """Open a dedicated, unpooled autocommit connection for holding session locks (``options``
    add connection parameters, such as a ``cronworker``'s ``application_name``).

    With psycopg 3 it binds parameters on the server (its statements' text stays short, in
    ``pg_stat_activity`` too) and, by default, prepares a statement the second time it runs
    (Django turns psycopg's preparing off for every connection), so the statements a warm
    connection repeats are planned once: planning the run's acquiring statement costs twice
    its execution. Neither where a transaction pooler is declared (prepared statements need
    the same server connection), nor where the alias's OPTIONS choose otherwise."""
    pooled = app_settings.POOLING in ("transaction", "statement")
    if binding != "client" and not pooled and is_psycopg3:
        threshold = PREPARE_THRESHOLD if binding == "prepared" else None
        options = {"server_side_binding": True, "prepare_threshold": threshold, **options}
    connection = unpooled_connection(alias, **options)
    # The heartbeat thread checks this connection while the job runs elsewhere.
    connection.inc_thread_sharing()
    ensure_connected(connection)
    return connection


def pipelined(connection: BaseDatabaseWrapper) -> AbstractContextManager[object]:
    """Send the block's statements in one round trip where the driver can (psycopg 3 pipeline
    mode, libpq >= 14): a statement's errors then surface when the block ends, and a result
    is read after it. Elsewhere (psycopg2, older libpq) each statement is its own round trip."""
    raw: Any = connection.connection
    pipeline = getattr(raw, "pipeline", None)
    if pipeline is None or not _pipeline_supported():
        return nullcontext()
    return _pipeline(connection, pipeline)


class _ErrorRaisedAlready(logging.Filter):
    """Drops the driver's "error ignored terminating" line: a pipeline left with an error
    (a read-only server refusing the claim) logs the sync's error beside the one raised from
    the block, which the caller reports in its own one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("error ignored terminating")


@contextmanager
def _pipeline(connection: BaseDatabaseWrapper, pipeline: Any) -> Iterator[object]:
    """The driver's pipeline, its own errors (entering it on a closed connection, the results
    of its sync) raised as Django's, as a statement's would be."""
    driver_log = logging.getLogger("psycopg")
    quiet = _ErrorRaisedAlready()
    driver_log.addFilter(quiet)
    try:
        with connection.wrap_database_errors, pipeline() as context:
            yield context
    finally:
        driver_log.removeFilter(quiet)


@functools.cache
def _pipeline_supported() -> bool:
    try:
        from psycopg import Pipeline
    except ImportError:
        return False
    return bool(Pipeline.is_supported())


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
def answer_within(connection: BaseDatabaseWrapper, seconds: float) -> Iterator[Callable[[], bool]]:
    """Raise ``DatabaseUnavailable`` if the block's statements get no answer in time, and
    ``DatabaseReadOnly`` if the server refuses one of them as a write in a read-only
    transaction (the blocks hold our own statements, never a job's).

    On time-out the connection is cut (see ``_cut()``) and unusable afterwards; for a lock
    connection that also ends the lock, as a dead network would. Yields ``done``: calling it
    inside the block ends the deadline there, and returns whether the connection was cut.
    """
    deadline = watchdog.arm(seconds, lambda: _cut(connection))
    try:
        yield lambda: watchdog.disarm(deadline)
    except DatabaseError as error:
        if watchdog.disarm(deadline):
            raise DatabaseUnavailable(
                f"no answer from PostgreSQL at {describe_server(connection.alias)} "
                f"(alias {connection.alias!r}) within {seconds:g} s"
            ) from error
        if read_only(error):
            raise refusing_writes(connection.alias) from error
        raise
    finally:
        watchdog.disarm(deadline)


# -- warm lock connections ----------------------------------------------------------------------


@dataclass(eq=False)
class LockConnection:
    """A dedicated lock connection checked out of this process's idle set, and its origin."""

    wrapper: BaseDatabaseWrapper
    alias: str
    opened: float = field(default_factory=time.monotonic)
    pid: int = field(default_factory=os.getpid)
    #: While it sits idle outside a scheduler: the deadline that closes it.
    closing: Deadline | None = None

    @property
    def age(self) -> float:
        return time.monotonic() - self.opened


class _Idle:
    """This process's idle lock connections, per alias, and the settings they were opened with."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.by_alias: dict[str, list[LockConnection]] = {}
        self.server: dict[str, tuple[object, ...]] = {}
        self.pid = os.getpid()


_idle = _Idle()
#: Connections a forked child inherited from its parent: kept referenced and never closed, since
#: closing would send the parent's server a goodbye on the parent's socket.
_inherited: list[LockConnection] = []


def _forget_after_fork() -> None:
    """In a forked child: the parent's idle connections are not ours to use or to close."""
    global _idle, _schedulers
    for connections_ in _idle.by_alias.values():
        _inherited.extend(connections_)
    _idle = _Idle()
    _schedulers = 0  # the parent's scheduler threads are not in the child


os.register_at_fork(after_in_child=_forget_after_fork)


def _server_of(alias: str) -> tuple[object, ...]:
    settings_dict = require_postgresql(alias).settings_dict
    return tuple(settings_dict.get(name) for name in ("HOST", "PORT", "NAME", "USER"))


def still_open(connection: LockConnection) -> bool:
    """Whether an idle connection is still open, without a round trip: an idle connection has
    nothing to read, so a readable socket means the server closed it (a terminated backend, a
    restart) or said something unasked; either way it is not reused."""
    raw: Any = connection.wrapper.connection
    if raw is None or raw.closed:
        return False
    try:
        descriptor = raw.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(descriptor, select.POLLIN | select.POLLERR | select.POLLHUP)
            return not poller.poll(0)
        readable, _, failed = select.select([descriptor], [], [descriptor], 0)
        return not readable and not failed
    except (OSError, ValueError):
        return False


def close_connection(connection: LockConnection) -> None:
    """Close a lock connection of this process (one a forked child inherited stays open)."""
    if connection.pid != os.getpid():
        _inherited.append(connection)
        return
    with suppress(DatabaseError):  # the socket may be dead already
        connection.wrapper.close()


def checkout(alias: str = DEFAULT_DB_ALIAS) -> LockConnection:
    """A lock connection for one holder: a warm idle one that is still open and young enough,
    else a new one. The caller owns it until
    [checkin][django_advisory_cron.db.connections.checkin]."""
    if _idle.pid != os.getpid():  # forked by a path that skipped the at-fork hook
        _forget_after_fork()
    server = _server_of(alias)
    max_age = app_settings.LOCK_CONNECTION_MAX_AGE
    chosen: LockConnection | None = None
    discarded: list[LockConnection] = []
    with _idle.guard:
        idle = _idle.by_alias.setdefault(alias, [])
        if _idle.server.get(alias) != server:
            discarded.extend(idle)
            idle.clear()
            _idle.server[alias] = server
        while idle:
            candidate = idle.pop()  # the most recently used: the likeliest to be alive
            if candidate.closing is not None:
                watchdog.disarm(candidate.closing)
                candidate.closing = None
            if candidate.age < max_age and still_open(candidate):
                chosen = candidate
                break
            discarded.append(candidate)
    for connection in discarded:
        close_connection(connection)
    if chosen is not None:
        return chosen
    # A connection kept for a moment only prepares nothing: its few repeats would not repay
    # it, and behind an undeclared transaction pooler two clients' prepared statements clash.
    binding: Binding = "server" if closes_when_idle() else "prepared"
    return LockConnection(open_lock_connection(alias, binding=binding), alias)


#: Idle lock connections kept per alias while a scheduler runs here and ``LOCK_POOL_SIZE`` is
#: ``None``.
WARM_POOL_SIZE = 8

#: Idle lock connections kept per alias by a process that runs no scheduler, with
#: ``LOCK_POOL_SIZE`` ``None``: each closes after ``IDLE_CLOSE`` seconds unused.
QUIET_POOL_SIZE = 1

#: Seconds an idle lock connection of a process that runs no scheduler stays open: under the
#: 5 s that ``DROP DATABASE`` waits for a database's sessions to end, so a test runner (or an
#: operator) dropping the database right after a lock is not refused.
IDLE_CLOSE = 2.0

_schedulers = 0
_schedulers_guard = threading.Lock()


def pool_size() -> int:
    """How many idle lock connections this process keeps per alias: ``LOCK_POOL_SIZE``, or
    when it is ``None``, [WARM_POOL_SIZE][django_advisory_cron.db.connections.WARM_POOL_SIZE] while
    a scheduler runs in this process and
    [QUIET_POOL_SIZE][django_advisory_cron.db.connections.QUIET_POOL_SIZE] otherwise (closed
    when idle: see [closes_when_idle][django_advisory_cron.db.connections.closes_when_idle])."""
    size = app_settings.LOCK_POOL_SIZE
    if size is not None:
        return size
    return WARM_POOL_SIZE if _schedulers else QUIET_POOL_SIZE


def closes_when_idle() -> bool:
    """Whether a kept connection closes after ``IDLE_CLOSE`` s unused: with the default
    ``LOCK_POOL_SIZE`` in a process that runs no scheduler. An idle connection keeps its
    database busy (``DROP DATABASE`` refuses after waiting 5 s): a process that takes a lock now
    and then keeps one warm for the next lock, not for good."""
    return app_settings.LOCK_POOL_SIZE is None and not _schedulers


def _close_if_idle(connection: LockConnection) -> None:
    """On the deadline thread: close ``connection`` if it is still idle (a holder that checked
    it out meanwhile disarmed this, but may have won the race)."""
    with _idle.guard:
        idle = _idle.by_alias.get(connection.alias, [])
        if connection.closing is None or connection not in idle:
            return
        idle.remove(connection)
        connection.closing = None
    close_connection(connection)


@contextmanager
def warm_while_scheduling() -> Iterator[None]:
    """Keep lock connections warm while a scheduler runs in this process (with the default
    ``LOCK_POOL_SIZE``); close the idle ones when the last scheduler stops."""
    global _schedulers
    with _schedulers_guard:
        _schedulers += 1
    try:
        yield
    finally:
        with _schedulers_guard:
            _schedulers -= 1
            last = _schedulers == 0
        if last and app_settings.LOCK_POOL_SIZE is None:
            close_lock_connections()


def checkin(connection: LockConnection, *, reusable: bool) -> None:
    """Give a lock connection back. ``reusable`` only when it provably holds no lock and its
    last statement succeeded; otherwise (and when the idle set is full, the connection too old,
    or the settings changed) it is closed."""
    if (
        reusable
        and connection.pid == os.getpid()
        and connection.wrapper.connection is not None
        and connection.age < app_settings.LOCK_CONNECTION_MAX_AGE
    ):
        server, size = _server_of(connection.alias), pool_size()
        with _idle.guard:
            idle = _idle.by_alias.setdefault(connection.alias, [])
            if len(idle) < size and _idle.server.get(connection.alias) == server:
                idle.append(connection)
                if closes_when_idle():
                    connection.closing = watchdog.arm(
                        IDLE_CLOSE, functools.partial(_close_if_idle, connection)
                    )
                return
    close_connection(connection)


def close_lock_connections(alias: str | None = None) -> int:
    """Close this process's idle lock connections (of ``alias``, or all); how many were closed.

    For the end of a test session (``DROP DATABASE`` refuses while they are connected) and for
    code that wants no idle server connections left behind."""
    with _idle.guard:
        aliases = [alias] if alias is not None else list(_idle.by_alias)
        closing = [c for name in aliases for c in _idle.by_alias.pop(name, [])]
    for connection in closing:
        close_connection(connection)
    return len(closing)


def idle_lock_connections(alias: str = DEFAULT_DB_ALIAS) -> int:
    """How many idle lock connections this process keeps for ``alias``."""
    with _idle.guard:
        return len(_idle.by_alias.get(alias, []))
