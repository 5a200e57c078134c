"""How the lock database is reached: directly, or through a connection pooler (and which mode).

Session-level advisory locks are only safe when every statement of a client runs on the same
server connection. Behind PgBouncer in transaction (or statement) pooling the unlock can run on
another server connection and silently do nothing, leaving the lock held until that backend
dies. This module tells the cases apart:

- ``static_pooling()``: settings alone (``ADVISORY_CRON["POOLING"]``, port 6432,
  ``DISABLE_SERVER_SIDE_CURSORS``). Free; used on every run.
- ``probe()``: two live probes against the server, each a couple of round trips, with a
  client-side deadline on every step (connect, send, receive), so a database that is down or a
  pooler whose pool is exhausted yields an "unknown" result instead of a hang or a crash.

  1. *Is a pooler in the path?* The backend PID a client receives at start-up equals
     ``pg_backend_pid()`` on a direct connection; PgBouncer invents its own.
  2. *Transaction pooling?* Client A takes a **shared** session lock on a reserved key and
     disconnects; client B looks for it in the server's lock table. A direct connection or
     session pooling (``DISCARD ALL``) releases it within milliseconds; under transaction or
     statement pooling the server connection, and the lock, outlive the client. That is
     exactly the hazard. The shared mode on a reserved key never conflicts with anything.

Probe results are cached per process and per alias (errors are not cached).

``scope="auto"`` needs no probe (``resolve_scope()``): whether *any* pooler is in the path is
one round trip on Django's own connection (the start-up PID against ``pg_backend_pid()``),
cached per process and alias. Direct means session scope; a pooler means transaction scope,
which is correct under every pooling mode. The probe stays for the check that proves an
explicit ``scope="session"`` job unsafe.
"""

from __future__ import annotations

import copy
import os
import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from ..conf import Pooling, app_settings
from ..core.keys import LockKey, job_key
from ..core.scopes import ResolvedScope, Scope
from ..exceptions import ProbeError, ProbeTimeout, first_line
from . import sql
from .connections import require_postgresql
from .execute import fetch_one

PGBOUNCER_PORT = 6432

#: Name whose lock key the transaction-pooling probe takes in shared mode. Reserved: a job
#: with this key would meet the shared locks the probe leaves behind under transaction pooling.
PROBE_NAME = "django_advisory_cron.pooling-probe"

#: Seconds the whole probe may take, client side (connects, queries, polling).
PROBE_TIMEOUT = 5.0
#: Seconds client B watches for the probe lock to disappear. Direct connections and session
#: pooling release it within a few milliseconds; a lock still held after this is leaked.
PROBE_WINDOW = 1.0

_TRANSACTION_MODES = ("transaction", "statement")


def probe_key() -> LockKey:
    """The reserved lock key of the transaction-pooling probe (in the configured namespace)."""
    return job_key(PROBE_NAME)


# -- static signals ------------------------------------------------------------------------


def static_pooling(alias: str) -> tuple[Pooling | None, str]:
    """Best guess from settings alone: ``(mode or None when unknown, the reason)``."""
    declared = app_settings.POOLING
    if declared is not None:
        return declared, "ADVISORY_CRON['POOLING'] says so"
    settings_dict = connections[alias].settings_dict
    if str(settings_dict.get("PORT") or "") == str(PGBOUNCER_PORT):
        return "transaction", f"port {PGBOUNCER_PORT} is PgBouncer's default"
    if settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        return "transaction", "DISABLE_SERVER_SIDE_CURSORS is set, as for transaction pooling"
    return None, "no pooler declared or suggested by the settings"


def resolve_scope(
    scope: Scope, alias: str, *, leased: Callable[[], bool] | None = None
) -> ResolvedScope:
    """The scope a lock on ``alias`` uses: ``"auto"`` is lease scope where ``leased`` says
    the caller's claims are leased (a ``cronworker`` whose claim connection is transaction
    pooled), else transaction scope whenever the settings say the alias is transaction
    pooled or a pooler is found in the path, else session scope. May cost one round trip per
    process and alias (see ``pooler_in_path()``). ``scope`` was checked where it came in (a
    job, a lock).
    """
    if scope != "auto":
        return scope
    if leased is not None and leased():
        return "lease"
    return "transaction" if transaction_pooled(alias) else "session"


def transaction_pooled(alias: str) -> bool:
    """Whether connections to ``alias`` are transaction pooled, as ``scope="auto"`` reads it:
    the settings say so, or a pooler is found in the path."""
    declared = app_settings.POOLING
    if declared is not None:
        return declared in _TRANSACTION_MODES
    return is_transaction_pooled(alias) or pooler_in_path(alias)


_in_path: dict[tuple[Any, ...], bool] = {}


def startup_pid(connection: BaseDatabaseWrapper) -> int | None:
    """The backend PID the client received when it connected (PgBouncer invents one)."""
    raw: Any = connection.connection
    info = getattr(raw, "info", None)  # psycopg 3
    if info is not None:
        return int(info.backend_pid)
    get_pid = getattr(raw, "get_backend_pid", None)  # psycopg2
    return int(get_pid()) if get_pid is not None else None


def pooler_in_path(alias: str) -> bool:
    """Whether a connection pooler sits between Django's connection for ``alias`` and the
    server: the start-up PID differs from ``pg_backend_pid()``. One round trip, once per
    process and alias; raises ``DatabaseUnavailable`` when the server cannot be reached."""
    key = (os.getpid(), *_cache_key(alias))
    with _cache_lock:
        known = _in_path.get(key)
    if known is not None:
        return known
    connection = require_postgresql(alias)
    row = fetch_one(connection, sql.backend_pid())
    assert row is not None
    found = startup_pid(connection) != int(row[0])
    with _cache_lock:
        _in_path[key] = found
    return found


def is_transaction_pooled(alias: str) -> bool:
    """True when session state cannot be trusted to stay on one server connection.

    Uses the static signals and, if this process already probed the alias, the probe's
    answer. An explicit ``POOLING`` setting always wins. Never opens a connection.
    """
    return pooling(alias)[0] in _TRANSACTION_MODES


def pooling(alias: str) -> tuple[Pooling | None, str]:
    """The best known mode without I/O: declared, else a cached live probe, else guessed."""
    static_mode, static_reason = static_pooling(alias)
    if app_settings.POOLING is not None:
        return static_mode, static_reason
    cached = cached_probe(alias)
    if cached is not None and cached.mode is not None:
        return cached.mode, f"live probe: {cached.reason}"
    return static_mode, static_reason


# -- live probe ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """What the live probes found for one alias."""

    alias: str
    #: "none" (direct), "session", "transaction" (or statement); None when unknown.
    mode: Pooling | None
    #: A pooler is in the path (start-up PID differs from ``pg_backend_pid()``).
    pooler: bool | None
    #: The probe's shared session lock was still held after its client disconnected.
    lock_outlived_client: bool | None
    reason: str
    startup_pid: int | None = None
    server_pid: int | None = None
    #: Connections opened and queries sent (each query is one round trip).
    connections: int = 0
    queries: int = 0
    elapsed_ms: float = 0.0
    error: str = ""
    checked_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        """True when both probes answered."""
        return not self.error and self.mode is not None


def _libpq_keywords() -> frozenset[str]:
    from psycopg import pq

    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def connect_params(alias: str) -> dict[str, Any]:
    """libpq parameters for ``alias``, as Django would connect (never through ``pool``)."""
    base = connections[alias]
    settings_dict = copy.deepcopy(base.settings_dict)
    settings_dict.setdefault("OPTIONS", {}).pop("pool", None)
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias)
    params = wrapper.get_connection_params()
    keywords = _libpq_keywords()
    clean = {key: value for key, value in params.items() if key in keywords}
    clean.setdefault("application_name", "django-advisory-cron probe")
    return clean


def _wait(pgconn: Any, *, write: bool, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ProbeTimeout()
    # selectors, not select.select(): a busy process may have descriptors above FD_SETSIZE.
    with selectors.DefaultSelector() as selector:
        selector.register(pgconn.socket, selectors.EVENT_WRITE if write else selectors.EVENT_READ)
        if not selector.select(remaining):
            raise ProbeTimeout()


class _Client:
    """One raw libpq connection driven in non-blocking mode, so every step has a deadline."""

    def __init__(self, params: dict[str, Any], deadline: float) -> None:
        from psycopg import pq
        from psycopg.conninfo import make_conninfo

        self.deadline = deadline
        self.pq = pq
        conninfo = make_conninfo(**{key: str(value) for key, value in params.items()})
        self.pgconn = pq.PGconn.connect_start(conninfo.encode())
        try:
            self._connect()
        except BaseException:
            self.close()
            raise
        self.startup_pid = int(self.pgconn.backend_pid)
        self.queries = 0

    def _connect(self) -> None:
        polling = self.pq.PollingStatus
        status: int = polling.WRITING
        while True:
            if status == polling.OK:
                return
            if status == polling.FAILED:
                raise ProbeError(self._message())
            _wait(self.pgconn, write=status == polling.WRITING, deadline=self.deadline)
            status = self.pgconn.connect_poll()

    def _message(self) -> str:
        text: str = self.pgconn.get_error_message()
        return (text.strip().splitlines() or ["connection failed"])[0]

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Send one simple-protocol query (one round trip) and return its text rows."""
        pgconn = self.pgconn
        pgconn.nonblocking = 1
        pgconn.send_query(sql.encode())
        self.queries += 1
        while pgconn.flush():
            _wait(pgconn, write=True, deadline=self.deadline)
        while True:
            pgconn.consume_input()
            if not pgconn.is_busy():
                break
            _wait(pgconn, write=False, deadline=self.deadline)
        rows: list[tuple[str | None, ...]] = []
        error = ""
        while (result := pgconn.get_result()) is not None:
            if result.status == self.pq.ExecStatus.TUPLES_OK:
                rows = [
                    tuple(_text(result.get_value(row, col)) for col in range(result.nfields))
                    for row in range(result.ntuples)
                ]
            elif result.status != self.pq.ExecStatus.COMMAND_OK:
                error = (
                    result.error_message.decode(errors="replace").strip().splitlines()
                    or ["query failed"]
                )[0]
        if error:
            raise ProbeError(error)
        return rows

    def close(self) -> None:
        self.pgconn.finish()


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _run_probe(alias: str, timeout: float, window: float) -> ProbeResult:
    started = time.monotonic()
    deadline = started + timeout
    key = probe_key()
    classid, objid, objsubid = key.lock_ids or (0, 0, 0)
    if connections[alias].vendor != "postgresql":
        raise ProbeError(f"database {alias!r} is not PostgreSQL")
    params = connect_params(alias)
    # libpq's own connect_timeout is whole seconds (at least 2); our deadline is tighter.
    params.setdefault("connect_timeout", max(2, int(timeout + 0.999)))
    counts = {"connections": 0, "queries": 0}

    def finish(**values: Any) -> ProbeResult:
        return ProbeResult(
            alias=alias,
            elapsed_ms=round((time.monotonic() - started) * 1000, 1),
            connections=counts["connections"],
            queries=counts["queries"],
            **values,
        )

    client_a = _Client(params, deadline)
    counts["connections"] += 1
    try:
        row = client_a.query(sql.probe_lock(key))[0]
    finally:
        counts["queries"] += getattr(client_a, "queries", 0)
        client_a.close()
    server_pid, taken = int(row[0] or 0), row[1] == "t"
    startup_pid = client_a.startup_pid
    pooler = startup_pid != server_pid
    if not taken:
        return finish(
            mode=None,
            pooler=pooler,
            lock_outlived_client=None,
            reason="the probe's reserved lock key is held exclusively by another session",
            startup_pid=startup_pid,
            server_pid=server_pid,
            error="probe lock not granted",
        )
    if not pooler:
        # The start-up backend is the server's: a lock that outlives the client can only be a
        # backend slow to exit (a loaded server), so it is watched until the deadline, not
        # just for the window, before the alias is called pooled (leaving the last poll time
        # to answer).
        window = max(window, deadline - time.monotonic() - 0.5)
    held = _still_held(params, deadline, window, server_pid, (classid, objid, objsubid), counts)
    if held:
        mode: Pooling = "transaction"
        reason = (
            "a session lock outlived its client, as under transaction or statement pooling, "
            "or session pooling without a reset query"
        )
    elif pooler:
        mode = "session"
        reason = "a pooler is in the path, and it ended the session with its client"
    else:
        mode = "none"
        reason = "direct connection: the start-up backend PID is the server's"
    return finish(
        mode=mode,
        pooler=pooler,
        lock_outlived_client=held,
        reason=reason,
        startup_pid=startup_pid,
        server_pid=server_pid,
    )


def _still_held(
    params: dict[str, Any],
    deadline: float,
    window: float,
    pid: int,
    ids: tuple[int, int, int],
    counts: dict[str, int],
) -> bool:
    """Poll the server's lock table from a second client until the probe lock is gone or time
    runs out."""
    query = sql.probe_still_held(pid, ids)
    client_b = _Client(params, deadline)
    counts["connections"] += 1
    try:
        watch_until = time.monotonic() + window
        delay = 0.02  # polls at about 0, 20, 80, 260, 800 and 1000 ms: six at most
        while True:
            if client_b.query(query)[0][0] == "0":
                return False
            if time.monotonic() >= watch_until:
                return True
            time.sleep(min(delay, max(0.0, watch_until - time.monotonic())))
            delay *= 3
    finally:
        counts["queries"] += client_b.queries
        client_b.close()


_cache: dict[tuple[Any, ...], ProbeResult] = {}
_cache_lock = threading.Lock()


def _cache_key(alias: str) -> tuple[Any, ...]:
    settings_dict = connections[alias].settings_dict
    return (
        alias,
        settings_dict.get("HOST"),
        str(settings_dict.get("PORT") or ""),
        settings_dict.get("NAME"),
        settings_dict.get("USER"),
    )


def cached_probe(alias: str) -> ProbeResult | None:
    """The result of an earlier successful ``probe()`` of ``alias`` in this process."""
    if alias not in connections.settings:
        return None
    with _cache_lock:
        return _cache.get(_cache_key(alias))


def clear_cache() -> None:
    """Forget every cached probe and pooler-in-path result (tests; after re-pointing an
    alias)."""
    with _cache_lock:
        _cache.clear()
        _in_path.clear()


def _unknown(alias: str, started: float, error: str) -> ProbeResult:
    """The result of a probe that could not finish."""
    return ProbeResult(
        alias=alias,
        mode=None,
        pooler=None,
        lock_outlived_client=None,
        reason="unknown",
        elapsed_ms=round((time.monotonic() - started) * 1000, 1),
        error=error,
    )


def probe(
    alias: str,
    *,
    timeout: float = PROBE_TIMEOUT,
    window: float = PROBE_WINDOW,
    refresh: bool = False,
) -> ProbeResult:
    """Probe ``alias`` live; never raises for an unreachable or saturated database.

    A successful result is cached for the process; ``refresh=True`` probes again.
    """
    if not refresh:
        cached = cached_probe(alias)
        if cached is not None:
            return cached
    started = time.monotonic()
    try:
        result = _run_probe(alias, timeout, min(window, timeout))
    except ProbeTimeout:
        result = _unknown(
            alias, started, f"no answer within {timeout:g} s (database down, or the pool exhausted)"
        )
    except Exception as error:
        result = _unknown(alias, started, first_line(error))
    if result.ok:
        with _cache_lock:
            _cache[_cache_key(alias)] = result
    return result
