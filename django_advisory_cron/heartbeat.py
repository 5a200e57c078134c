"""Lock-loss detection for session-scoped locks.

A session lock lives exactly as long as its server connection. If that connection dies while
the job runs (``pg_terminate_backend``, a PostgreSQL restart, a network failure) the lock is
gone and another replica may start the same job. A daemon thread asks the lock connection
itself, every ``ADVISORY_CRON["HEARTBEAT"]`` seconds, whether its backend still holds the lock
(one round trip). The job's own connections are never touched.

On loss the lock's ``lock_lost(error)`` hook runs in the heartbeat thread: it marks
``lock.lost``, logs an error and sends :data:`~.signals.lock_lost`; the runner also marks the
run ``lock_lost`` through a fresh short-lived connection (the lock connection is dead).

Transaction-scoped locks need no heartbeat: they live on the job's own connection, so the job's
next query fails when it dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .keys import LockKey
from .lockconn import unpooled_connection

if TYPE_CHECKING:
    from .locks import AdvisoryLock

logger = logging.getLogger("django_advisory_cron")

#: Seconds a connection attempt may take when recording a lost lock.
RECORD_CONNECT_TIMEOUT = 5
#: Seconds the runner keeps retrying to record the end of a run whose lock was lost (the
#: server may be restarting).
FINISH_PATIENCE = 15.0


class LockLost(DatabaseError):
    """The lock connection is alive but its backend no longer holds the lock."""


def held_statement(key: LockKey) -> tuple[str, dict[str, Any]]:
    """SQL returning whether this connection's backend still holds ``key`` (one row)."""
    ids = key.pg_locks_ids
    if ids is not None:
        classid, objid, objsubid = ids
        where = "classid = %(hb_classid)s AND objid = %(hb_objid)s AND objsubid = %(hb_objsubid)s"
        params: dict[str, Any] = {"hb_classid": classid, "hb_objid": objid, "hb_objsubid": objsubid}
    else:
        # The one-bigint form: pg_locks splits the (sign-extended) key into two oids.
        where = (
            "objsubid = 1 AND classid::bigint = (hashtext(%(hb_name)s)::bigint >> 32) & 4294967295"
            " AND objid::bigint = hashtext(%(hb_name)s)::bigint & 4294967295"
        )
        params = {"hb_name": key.name}
    sql = (
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
        f"AND mode = 'ExclusiveLock' AND pid = pg_backend_pid() AND {where})"
    )
    return sql, params


class Heartbeat:
    """A daemon thread watching one session lock's connection."""

    def __init__(
        self,
        connection: BaseDatabaseWrapper,
        key: LockKey,
        interval: float,
        on_lost: Callable[[BaseException], None],
    ) -> None:
        self.connection = connection
        self.key = key
        self.interval = float(interval)
        self.on_lost = on_lost
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"advisory-cron-heartbeat {key}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; waits for a check in flight (up to one interval). Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.interval + 1)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def check(self) -> None:
        """Raise if the lock connection died or no longer holds the lock."""
        sql, params = held_statement(self.key)
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        self.beats += 1
        if not row or not row[0]:
            raise LockLost(f"the lock {self.key} is no longer held by its connection")

    def _run(self) -> None:
        try:
            self._beat()
        finally:
            # lock_lost receivers may have used the ORM in this thread: close what they opened.
            connections.close_all()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception as error:
                if self._stop.is_set():
                    return  # the lock is being released; its owner handles errors
                try:
                    self.on_lost(error)
                except Exception:
                    logger.exception("lock_lost handling failed for %s", self.key)
                return


def fresh_connection(alias: str) -> BaseDatabaseWrapper:
    """A short-lived unpooled connection, for recording after the lock connection died."""
    return unpooled_connection(alias, connect_timeout=RECORD_CONNECT_TIMEOUT)


def execute_fresh(alias: str, sql: str, params: dict[str, Any], *, patience: float) -> bool:
    """Run one statement on a fresh connection, retrying for ``patience`` s (e.g. a restart).

    Returns whether it succeeded; failures are logged, never raised.
    """
    deadline = time.monotonic() + patience
    delay = 0.2
    while True:
        connection = fresh_connection(alias)
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
            return True
        except DatabaseError as error:
            if time.monotonic() + delay > deadline:
                logger.error("could not record on %r: %s", alias, error)
                return False
        finally:
            connection.close()
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _table() -> str:
    from .models import JobRun

    return f'"{JobRun._meta.db_table}"'


def mark_run_lock_lost(alias: str, run_id: int, error: BaseException, *, patience: float) -> bool:
    """Mark a running run ``lock_lost`` as soon as the loss is seen (the job still runs)."""
    sql = (
        f"UPDATE {_table()} SET status = 'lock_lost', error = %(error)s "
        "WHERE id = %(id)s AND status = 'running'"
    )
    return execute_fresh(alias, sql, {"id": run_id, "error": lost_text(error)}, patience=patience)


def finish_lost_run(alias: str, run_id: int, status: str, error: str, *, patience: float) -> bool:
    """Finish a run whose lock was lost: ``status`` unless another holder already closed it."""
    sql = f"""
UPDATE {_table()} SET
    status = CASE WHEN status IN ('running', 'lock_lost') THEN %(status)s ELSE status END,
    finished = clock_timestamp(),
    error = CASE WHEN error = '' THEN %(error)s
                 WHEN %(error)s = '' THEN error
                 ELSE error || E'\\n' || %(error)s END
 WHERE id = %(id)s"""
    params = {"id": run_id, "status": status, "error": error}
    return execute_fresh(alias, sql, params, patience=patience)


def lost_text(error: BaseException) -> str:
    """One line for the run's error text."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"lock lost while the job ran: {first}"


def start_for(lock: AdvisoryLock, interval: float) -> Heartbeat:
    """Start watching ``lock`` (session scope, acquired, with an open connection)."""
    assert lock.connection is not None
    return Heartbeat(lock.connection, lock.key, interval, lock.lock_lost).start()
