"""Run one job: take its lock, claim its tick, record the run, send signals, release.

In session scope a whole run costs the same two round trips as a bare try-lock + unlock: the
statement that tries the lock also marks dead ``running`` rows ``interrupted`` and inserts this
run's row (PostgreSQL evaluates the CTEs once, in one snapshot); the statement that unlocks also
finishes the row. A process that finds the lock held records its skip in its single statement.

In transaction scope the lock, the run row and the job's writes share one transaction; the job
runs in a savepoint, so a failure rolls back the job's work but still commits a ``failed`` row.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from . import heartbeat, signals
from .conf import app_settings
from .jobs import Job
from .locks import AdvisoryLock, Row, Scope
from .models import TICK_TAKING, JobRun, RunStatus

logger = logging.getLogger("django_advisory_cron")

HOST = socket.gethostname()


@dataclass
class RunResult:
    """What one call of the runner did."""

    job: str
    status: RunStatus
    run_id: int | None = None
    tick: datetime | None = None
    value: Any = None
    error: BaseException | None = field(default=None, repr=False)
    interrupted_runs: int = 0
    lock: RunLock | None = field(default=None, repr=False)

    @property
    def ran(self) -> bool:
        """True when the job's function was called."""
        return self.status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOCK_LOST)

    @property
    def skipped(self) -> bool:
        return self.status in (RunStatus.SKIPPED_LOCKED, RunStatus.SKIPPED_TICK)

    @property
    def status_label(self) -> str:
        return str(RunStatus(self.status).label)


def _table(connection: BaseDatabaseWrapper) -> str:
    return connection.ops.quote_name(JobRun._meta.db_table)


_TAKING = ", ".join(f"'{status.value}'" for status in TICK_TAKING)


class RunLock(AdvisoryLock):
    """The job's advisory lock, whose statements also claim the tick and keep the history."""

    def __init__(
        self,
        job: Job[Any, Any],
        *,
        now: datetime | None,
        scope: Scope,
        wait: float,
        using: str | None,
    ) -> None:
        super().__init__(job.key, scope=scope, wait=wait, using=using)
        self.job = job
        self.now = now
        schedule = job.schedule
        max_skew = app_settings.MAX_SKEW
        around = now or datetime.now().astimezone()
        self.candidates = schedule.candidates(around, max_skew) if schedule else []
        self.max_skew = max_skew
        self.run_id: int | None = None
        self.tick: datetime | None = None
        self.reference: datetime | None = None
        self.interrupted_runs = 0
        self.tick_done = False
        self.recorded = False
        self.result: RunResult | None = None

    def _base_params(self) -> dict[str, Any]:
        return {
            **self.key.params,
            "job": self.job.name,
            "host": HOST[:255],
            "pid": os.getpid(),
        }

    def try_statement(self, final: bool) -> tuple[str, Mapping[str, Any]]:
        assert self.connection is not None
        table = _table(self.connection)
        function = (
            "pg_try_advisory_lock" if self.scope == "session" else "pg_try_advisory_xact_lock"
        )
        sql = f"""
WITH l AS (
    SELECT {function}({self.key.sql}) AS got,
           COALESCE(%(now)s::timestamptz, now()) AS ref
), t AS (
    SELECT l.got, l.ref,
           (SELECT c FROM unnest(%(ticks)s::timestamptz[]) AS c
             WHERE abs(extract(epoch FROM c - l.ref)) <= %(skew)s
             ORDER BY abs(extract(epoch FROM c - l.ref)) LIMIT 1) AS tick
      FROM l
), dead AS (
    UPDATE {table} SET status = '{RunStatus.INTERRUPTED.value}', finished = clock_timestamp(),
           error = 'the process running it died without finishing; found by host '
                   || %(host)s || ' pid ' || %(pid)s
     WHERE job = %(job)s AND status = '{RunStatus.RUNNING.value}' AND (SELECT got FROM t)
    RETURNING id
), ins AS (
    INSERT INTO {table} (job, tick, host, pid, started, status, error)
    SELECT %(job)s, t.tick, %(host)s, %(pid)s, clock_timestamp(),
           '{RunStatus.RUNNING.value}', ''
      FROM t WHERE t.got
    ON CONFLICT (job, tick) WHERE status IN ({_TAKING}) DO NOTHING
    RETURNING id
), skip AS (
    INSERT INTO {table} (job, tick, host, pid, started, finished, status, error)
    SELECT %(job)s, t.tick, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
           '{RunStatus.SKIPPED_LOCKED.value}', ''
      FROM t WHERE NOT t.got AND %(final)s
)
SELECT t.got, (SELECT id FROM ins), t.tick, t.ref, (SELECT count(*) FROM dead) FROM t
"""
        params = {
            **self._base_params(),
            "now": self.now,
            "ticks": self.candidates,
            "skew": self.max_skew,
            "final": final,
        }
        return sql, params

    def accept(self, row: Row) -> bool:
        got, self.run_id, self.tick, self.reference, self.interrupted_runs = row
        if got and self.run_id is None and self.interrupted_runs:
            # The row just marked interrupted may hold this tick: inside one statement its old
            # version still conflicts, so claim the tick again now that it has been given back.
            self.run_id = self._claim_tick()
        self.tick_done = bool(got) and self.run_id is None
        return bool(got)

    def _claim_tick(self) -> int | None:
        assert self.connection is not None
        sql = f"""
INSERT INTO {_table(self.connection)} (job, tick, host, pid, started, status, error)
VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), '{RunStatus.RUNNING.value}', '')
ON CONFLICT (job, tick) WHERE status IN ({_TAKING}) DO NOTHING
RETURNING id"""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, {**self._base_params(), "tick": self.tick})
            row = cursor.fetchone()
        return None if row is None else int(row[0])

    def finish_statement(self, status: RunStatus, error: str) -> tuple[str, Mapping[str, Any]]:
        """Finish the run row (and, in session scope, unlock in the same statement)."""
        assert self.connection is not None
        table = _table(self.connection)
        update = f"""UPDATE {table} SET status = %(status)s, finished = clock_timestamp(),
               error = %(error)s WHERE id = %(id)s"""
        params = {**self.key.params, "status": status.value, "error": error, "id": self.run_id}
        if self.scope == "transaction":
            return f"WITH u AS ({update}) SELECT true", params
        return f"WITH u AS ({update}) SELECT pg_advisory_unlock({self.key.sql})", params

    def skip_tick_statement(self) -> tuple[str, Mapping[str, Any]]:
        """Record a skip for a tick that already ran (and unlock, in session scope)."""
        assert self.connection is not None
        table = _table(self.connection)
        insert = f"""INSERT INTO {table} (job, tick, host, pid, started, finished, status, error)
            VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
                    '{RunStatus.SKIPPED_TICK.value}', '')"""
        params = {**self._base_params(), "tick": self.tick}
        if self.scope == "transaction":
            return f"WITH i AS ({insert}) SELECT true", params
        return f"WITH i AS ({insert}) SELECT pg_advisory_unlock({self.key.sql})", params

    def finish(self, status: RunStatus, error: str = "") -> None:
        """Record the outcome; in session scope this also releases the lock."""
        self.stop_heartbeat()
        if not self.lost:
            sql, params = self.finish_statement(status, error)
            try:
                row = self.fetch(sql, params)
                if self.scope == "session":
                    self.check_unlocked(row)
            except DatabaseError as exc:
                if self.scope == "transaction":
                    raise
                # The lock connection died after the last heartbeat; the lock died with it.
                self.lock_lost(exc)
        if self.lost:
            self._finish_lost(status, error)
        self.recorded = True
        if self.scope == "session":
            self.acquired = False

    def _finish_lost(self, status: RunStatus, error: str) -> None:
        """Record a run whose lock was lost, through a fresh connection."""
        if status == RunStatus.SUCCEEDED:
            status = RunStatus.LOCK_LOST
            if self.result is not None:
                self.result.status = status
        if self.run_id is not None:
            heartbeat.finish_lost_run(
                self.using, self.run_id, status.value, error, patience=heartbeat.FINISH_PATIENCE
            )

    @property
    def signal_sender(self) -> Any:
        return self.job

    def lock_lost(self, error: BaseException) -> None:
        self.lost = True
        if self.run_id is not None:
            heartbeat.mark_run_lock_lost(
                self.using, self.run_id, error, patience=app_settings.HEARTBEAT
            )
        super().lock_lost(error)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and self.run_id is not None and not self.recorded:
            # Interrupted (a signal) after the run row was written, before the job's own try
            # block took over: record it before the lock goes.
            if isinstance(exc, Exception):
                self.finish(RunStatus.FAILED, _error_text(exc))
            else:
                self.finish(RunStatus.INTERRUPTED, f"interrupted by {type(exc).__name__}")
        # A recorded failure still commits: the job's own work was rolled back to its savepoint.
        if self.recorded:
            exc_type, exc, tb = None, None, None
        super().__exit__(exc_type, exc, tb)

    def skip_tick(self) -> None:
        self.stop_heartbeat()
        sql, params = self.skip_tick_statement()
        row = self.fetch(sql, params)
        if self.scope == "session":
            self.check_unlocked(row)
            self.acquired = False


def _error_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)).strip()


def run_job(
    job: Job[Any, Any],
    *,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    scope: Scope | None = None,
    wait: float | None = None,
    using: str | None = None,
) -> RunResult:
    """Run ``job`` once under its lock; see the module docstring for what is recorded.

    ``now`` replaces the database clock as the run's reference time (tests, catch-up runs).
    A failure is recorded and re-raised; so is an interruption (``KeyboardInterrupt``,
    ``SystemExit``), recorded as ``interrupted``.
    """
    lock = RunLock(
        job,
        now=now,
        scope=scope or job.scope,
        wait=job.wait if wait is None else wait,
        using=using or job.using,
    )
    with lock:
        return _after_acquiring(job, lock, args, dict(kwargs or {}))


def _after_acquiring(
    job: Job[Any, Any], lock: RunLock, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> RunResult:
    result = RunResult(
        job.name,
        RunStatus.SKIPPED_LOCKED,
        tick=lock.tick,
        interrupted_runs=lock.interrupted_runs,
        lock=lock,
    )
    lock.result = result
    if lock.interrupted_runs:
        logger.warning("job %s: marked %d dead run(s) interrupted", job.name, lock.interrupted_runs)
    if not lock.acquired:
        logger.info("job %s skipped: locked by another process", job.name)
        signals.job_skipped.send(sender=job, run=result)
        return result
    if lock.tick_done:
        lock.skip_tick()
        result.status = RunStatus.SKIPPED_TICK
        logger.info("job %s skipped: tick %s already ran", job.name, lock.tick)
        signals.job_skipped.send(sender=job, run=result)
        return result
    result.run_id, result.status = lock.run_id, RunStatus.RUNNING
    _execute(job, lock, result, args, kwargs)
    return result


def _execute(
    job: Job[Any, Any],
    lock: RunLock,
    result: RunResult,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    logger.info("job %s started (tick %s, run %s)", job.name, lock.tick, lock.run_id)
    signals.job_started.send(sender=job, run=result)
    try:
        if lock.scope == "transaction":
            with transaction.atomic(using=lock.using):
                result.value = job.func(*args, **kwargs)
        else:
            result.value = job.func(*args, **kwargs)
    except Exception as error:
        result.status, result.error = RunStatus.FAILED, error
        lock.finish(RunStatus.FAILED, _error_text(error))
        logger.error("job %s failed", job.name, exc_info=error)
        signals.job_failed.send(sender=job, run=result, exception=error)
        raise
    except BaseException as error:
        result.status, result.error = RunStatus.INTERRUPTED, error
        lock.finish(RunStatus.INTERRUPTED, f"interrupted by {type(error).__name__}")
        logger.warning("job %s interrupted by %s", job.name, type(error).__name__)
        signals.job_failed.send(sender=job, run=result, exception=error)
        raise
    status = RunStatus.LOCK_LOST if lock.lost else RunStatus.SUCCEEDED
    result.status = status
    lock.finish(status)
    logger.info("job %s finished", job.name)
    signals.job_finished.send(sender=job, run=result)
