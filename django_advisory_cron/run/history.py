"""The run row: the statements a job's lock sends to claim its tick and record its outcome,
and the recording that must go through a fresh connection once the lock connection is gone.

In session scope a whole run costs the same two round trips as a bare try-lock + unlock: the
statement that tries the lock also marks dead ``running`` rows ``interrupted`` and inserts this
run's row with a lease; the statement that unlocks also finishes the row. While the job runs,
the heartbeat's lock check renews the lease in the same round trip. A ``running`` row whose
lease has not expired belongs to a holder that may still be running its body, even if its lock
connection died: nobody takes the job's lock while such a row exists.

In transaction scope the lock, the run row and the job's writes share one transaction (the
job runs in a savepoint, so a failure rolls back the job's work but still commits a ``failed``
row); if the connection is lost, the row rolls back with it and is recorded again here.
"""

from __future__ import annotations

import os
import socket
import traceback
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from ..conf import app_settings
from ..core.keys import LockKey
from ..core.scopes import ResolvedScope
from ..core.statuses import RunStatus
from ..db import sql
from ..db.execute import Row, execute_fresh, fetch_fresh
from ..db.sql import Statement
from ..exceptions import JobTimedOut, LockScopeError, stopping_signal
from ..lock.advisory import Send

HOST = socket.gethostname()[:255]

#: Seconds to keep retrying to record the end of a run whose lock was lost (the server may be
#: restarting).
FINISH_PATIENCE = 15.0

# The statuses a run ends with, as plain strings (what the statements send).
SUCCEEDED = RunStatus.SUCCEEDED.value
FAILED = RunStatus.FAILED.value
INTERRUPTED = RunStatus.INTERRUPTED.value
LOCK_LOST = RunStatus.LOCK_LOST.value
TIMED_OUT = RunStatus.TIMED_OUT.value


def stopped_by(error: BaseException, *, body: bool = True) -> str | None:
    """The signal that stopped a run which ended with ``error``, or ``None`` when ``error`` is
    a failure.

    ``body``: ``error`` came out of the job's own code (its body, a ``job_started`` receiver,
    an ``on_commit`` callback). Only a stop raised by a signal this process received (see
    [stopping_signal][django_advisory_cron.exceptions.stopping_signal]) counts there; anything
    the code raised itself, of any class (``SystemExit``, ``KeyboardInterrupt``,
    ``GeneratorExit``), is a failure. Otherwise (``body=False``: while the lock was being
    taken, before any of the job's code ran) every ``BaseException`` that is not an
    ``Exception`` is a stop."""
    name = stopping_signal(error)
    if name is None and not body and not isinstance(error, Exception):
        name = "SIGINT" if isinstance(error, KeyboardInterrupt) else "a signal"
    return name


def error_text(error: BaseException, *, body: bool = True) -> str:
    """What the history keeps of an exception: its traceback, or one line for a signal or a
    timeout (``body``: see [stopped_by][django_advisory_cron.run.history.stopped_by])."""
    if isinstance(error, JobTimedOut):
        return str(error)
    signal = stopped_by(error, body=body)
    if signal is not None:
        return f"interrupted by {signal}"
    return "".join(traceback.format_exception(error)).strip()


def status_of(error: BaseException | None, *, body: bool = True) -> str:
    """The status of a run that ended with ``error`` (``None``: it returned): ``interrupted``
    (its tick given back) only for a stop from outside; ``failed`` (its tick taken) for
    anything the job's code raised (``body``: see
    [stopped_by][django_advisory_cron.run.history.stopped_by])."""
    if error is None:
        return SUCCEEDED
    if isinstance(error, JobTimedOut):
        return TIMED_OUT
    return INTERRUPTED if stopped_by(error, body=body) is not None else FAILED


@dataclass
class RunFacts:
    """What one run is and what its claim found, held once: its
    [RunRecord][django_advisory_cron.run.history.RunRecord] writes it, and its
    [RunResult][django_advisory_cron.run.runner.RunResult] is one."""

    job: str
    _: KW_ONLY
    run_id: int | None = None
    tick: datetime | None = None
    #: The time the run was matched against the schedule's ticks: the database's ``now()`` at
    #: the first attempt to take the lock (or the ``now`` passed in).
    reference: datetime | None = None
    interrupted_runs: int = 0
    #: Started by hand ("run now"): recorded ``manual``, with no tick, and a pause does not
    #: hold it back.
    manual: bool = False
    #: Why the job was paused, when it was skipped for that.
    paused: str | None = None


class RunRecord:
    """One run's row, as statements for its lock (a
    [LockStatements][django_advisory_cron.lock.advisory.LockStatements]); what the claim finds
    is written on ``facts``."""

    whole_statements = True

    def __init__(
        self,
        facts: RunFacts,
        *,
        matches: list[tuple[datetime, datetime]],
        now: datetime | None,
        max_skew: float,
        using: str,
        task_id: str = "",
        once: bool = False,
    ) -> None:
        self.facts = facts
        #: At most once (the job's ``at_most_once``): an interrupted run's tick stays taken.
        self.once = once
        #: The task result id when a task queue delivered this run (recorded on its rows).
        self.task_id = task_id
        #: ``(instant, tick)`` pairs the reference time is matched against.
        self.matches = matches
        #: ``None`` until the first attempt returns the database's ``now()``; then fixed, so a
        #: run waiting for the lock keeps the tick it started for.
        facts.reference = now
        self.max_skew = max_skew
        #: Read once: a run keeps the lease it started with.
        self.lease = app_settings.LEASE
        self.record_skips = app_settings.RECORD_SKIPS
        #: How far a standby must have its claim and its finish before they return.
        self.synchronous_commit = app_settings.SYNCHRONOUS_COMMIT
        self.using = using
        self.pid = os.getpid()
        #: Running rows of this job, still within their lease, seen by the last attempt.
        self.live_runs = 0
        self.tick_done = False
        #: ``(status, error text)`` once the job has ended; read by the release statement.
        self.outcome: tuple[str, str] | None = None
        #: How many times the body was called (more than once when failures were retried),
        #: and a line for each attempt that failed before the last one.
        self.attempts = 1
        self.failed_attempts: list[str] = []
        #: What the run captured (its job's log records, a command's output), if it captures.
        self.output = ""
        #: Its lock is held on a connection shared with other runs' locks (claimed together):
        #: its release unlocks that one lock only.
        self.shared = False

    # -- statements for the lock ---------------------------------------------------------

    def acquire(self, key: LockKey, scope: ResolvedScope, final: bool) -> Statement:
        if self.once and scope == "transaction":
            raise LockScopeError(
                f"job {self.facts.job!r} is at_most_once, which needs a session lock, but its "
                "lock resolved to transaction scope (a transaction pooler is in the path): "
                "point ADVISORY_CRON['LOCK_DATABASE'] at a direct connection"
            )
        return claim([(self, key)], scope, final=final, settle=scope == "session")

    def claim(self, key: LockKey) -> sql.Claim:
        """What this run asks of [claim][django_advisory_cron.run.history.claim]."""
        facts = self.facts
        return sql.Claim(
            facts.job, key, self.matches, facts.reference, facts.manual, self.task_id, self.once
        )

    def accept(self, row: Row, scope: ResolvedScope, send: Send) -> bool:
        """Read its row of [claim][django_advisory_cron.run.history.claim]: whether the lock is
        held now (a lock the claim already released, its tick found taken, is not)."""
        facts = self.facts
        released, got, run_id, facts.tick, reference, interrupted, self.live_runs, facts.paused = (
            row[:8]
        )
        if facts.reference is None:
            facts.reference = reference
        facts.interrupted_runs += int(interrupted)
        if got and run_id is None and interrupted and not self.once:
            # The row just marked interrupted may hold this tick: inside one statement its old
            # version still conflicts, so claim the tick again now that it has been given back.
            claimed = send(
                sql.claim_tick(
                    job=self.facts.job,
                    host=HOST,
                    pid=self.pid,
                    tick=self.facts.tick,
                    lease=self.lease_in(scope),
                    task_id=self.task_id,
                    synchronous_commit=self.synchronous_commit,
                )
            )
            run_id = None if claimed is None else claimed[0]
        facts.run_id = None if run_id is None else int(run_id)
        self.tick_done = bool(got) and facts.run_id is None
        return bool(got) and not released

    def settled(self) -> bool:
        """The tick was found taken: waiting for the lock would change nothing."""
        return self.tick_done

    def lease_in(self, scope: ResolvedScope) -> float | None:
        """The lease its row carries: only session-scoped rows have one (transaction-scoped
        ones are invisible to other replicas until they commit, finished)."""
        return self.lease if scope == "session" else None

    def release(
        self, key: LockKey, scope: ResolvedScope, error: BaseException | None
    ) -> Statement | None:
        if self.tick_done and not self.record_skips:
            return sql.release_lock(key, scope, shared=self.shared)
        if self.tick_done:
            return sql.skip_tick(
                key,
                scope,
                job=self.facts.job,
                host=HOST,
                pid=self.pid,
                tick=self.facts.tick,
                task_id=self.task_id,
                shared=self.shared,
            )
        assert self.facts.run_id is not None  # taken, and the tick not done: the row is ours
        # No outcome yet: the job's code never ran (taking the lock was cut short).
        status, text = self.outcome or (
            status_of(error, body=False),
            error_text(error, body=False) if error else "",
        )
        return sql.finish_run(
            key,
            scope,
            run_id=self.facts.run_id,
            status=status,
            error=text,
            attempts=self.attempts,
            output=self.output,
            shared=self.shared,
            synchronous_commit=self.synchronous_commit,
        )

    def beat(self, key: LockKey) -> Statement:
        if self.facts.run_id is None:
            return sql.lock_held(key)
        return sql.renew_leases([(self.facts.run_id, key)], lease=self.lease)

    # -- recording without the lock connection ------------------------------------------

    def mark_lost(self, error_line: str) -> bool:
        """Mark the running row ``lock_lost`` at once. Its body may still be running, so the
        row keeps its lease (no longer renewed): other replicas wait for it to expire, or for
        ``finish_lost`` to record the body's end, which ends it."""
        if self.facts.run_id is None:
            return False
        statement = sql.mark_lock_lost(
            run_id=self.facts.run_id, job=self.facts.job, host=HOST, pid=self.pid, error=error_line
        )
        return execute_fresh(self.using, statement, patience=app_settings.HEARTBEAT)

    def finish_lost(self, status: str, text: str) -> bool:
        """Record the end of a run whose lock was lost (or whose holder is going away), through
        a fresh connection: its row is finished, with its attempts and output so far, or
        written again if it rolled back with its lost connection (transaction scope)."""
        statement = sql.record_lost_run(
            run_id=self.facts.run_id,
            job=self.facts.job,
            host=HOST,
            pid=self.pid,
            tick=self.facts.tick,
            status=status,
            error=text,
            attempts=self.attempts,
            output=self.output,
            task_id=self.task_id,
        )
        return execute_fresh(self.using, statement, patience=FINISH_PATIENCE)

    def fail_committed(self, text: str) -> bool:
        """A committed run whose ``on_commit`` callback raised: mark it failed."""
        if self.facts.run_id is None:
            return False
        statement = sql.fail_committed_run(run_id=self.facts.run_id, error=text)
        return execute_fresh(self.using, statement, patience=FINISH_PATIENCE)


def claim(
    runs: Sequence[tuple[RunRecord, LockKey]],
    scope: ResolvedScope,
    *,
    final: bool,
    settle: bool,
    census: str | None = None,
) -> Statement:
    """The statement taking the locks and claiming the ticks of ``runs`` (records of this
    process, with one lease and one ``max_skew``):
    [claim_runs][django_advisory_cron.db.sql.claim_runs]."""
    first = runs[0][0]
    return sql.claim_runs(
        [record.claim(key) for record, key in runs],
        scope,
        host=HOST,
        pid=first.pid,
        max_skew=first.max_skew,
        lease=first.lease_in(scope),
        final=final,
        settle=settle,
        record_skips=first.record_skips,
        census=census,
        synchronous_commit=first.synchronous_commit,
    )


# -- runs in a worker's child processes ----------------------------------------------------


def child_run(alias: str, *, job: str, tick: datetime | None, pid: int) -> tuple[int, str] | None:
    """``(run id, status)`` of the row a worker's child process (``pid``, this host) wrote
    for ``tick``; ``None`` if it wrote none."""
    row = fetch_fresh(
        alias, sql.child_run(job=job, host=HOST, pid=pid, tick=tick), patience=FINISH_PATIENCE
    )
    return None if row is None else (int(row[0]), str(row[1]))


def finish_child(
    alias: str, *, job: str, tick: datetime | None, pid: int, status: str, text: str
) -> bool:
    """Record the end of a worker's child process that had to be killed (or died of a
    signal): its row still ``running`` gets ``status``; with no row at all (a
    transaction-scoped run rolls back with its process) one is written."""
    statement = sql.finish_child_run(
        job=job, host=HOST, pid=pid, tick=tick, status=status, error=text
    )
    return execute_fresh(alias, statement, patience=FINISH_PATIENCE)
