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
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from ..core.keys import LockKey
from ..core.statuses import RunStatus
from ..db import others, sql
from ..db.execute import Row, execute_fresh, fetch_all, fetch_fresh
from ..db.sql import Statement
from ..exceptions import JobFailed, JobTimedOut, LockScopeError, stopping_signal
from ..lock.advisory import AdvisoryLock
from ..lock.holder import Send

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
class Run:
    """One run, the one record of it: what it is, what its claim found, how it ended (what
    [execute][django_advisory_cron.run.runner.execute] returns, as ``RunResult``), and the
    statements it sends through its lock's holder to claim its tick, renew its lease and
    record its outcome."""

    job: str
    status: RunStatus
    value: Any = None
    error: BaseException | None = field(default=None, repr=False)
    lock: AdvisoryLock | None = field(default=None, repr=False)
    _: KW_ONLY
    run_id: int | None = None
    tick: datetime | None = None
    #: The time the run was matched against the schedule's ticks: the database's ``now()`` at
    #: the first attempt to take the lock (or the ``now`` passed in); then fixed, so a run
    #: waiting for the lock keeps the tick it started for.
    reference: datetime | None = None
    interrupted_runs: int = 0
    #: Started by hand ("run now"): recorded ``manual``, with no tick, and a pause does not
    #: hold it back.
    manual: bool = False
    #: Why the job was paused, when it was skipped for that.
    paused: str | None = None
    #: ``(instant, tick)`` pairs the reference time is matched against.
    matches: list[tuple[datetime, datetime]] = field(
        default_factory=list, repr=False, compare=False
    )
    max_skew: float = field(default=0, repr=False, compare=False)
    #: The database its rows are written to.
    using: str | None = field(default=None, repr=False, compare=False)
    #: The task result id when a task queue delivered this run (recorded on its rows).
    task_id: str = field(default="", repr=False, compare=False)
    #: At most once (the job's ``at_most_once``): an interrupted run's tick stays taken.
    once: bool = field(default=False, repr=False, compare=False)
    #: Read once: a run keeps the lease it started with.
    lease: float = field(default_factory=lambda: app_settings.LEASE, repr=False, compare=False)
    record_skips: bool = field(
        default_factory=lambda: app_settings.RECORD_SKIPS, repr=False, compare=False
    )
    #: How far a standby must have its claim and its finish before they return.
    synchronous_commit: str | None = field(
        default_factory=lambda: app_settings.SYNCHRONOUS_COMMIT, repr=False, compare=False
    )
    pid: int = field(default_factory=os.getpid, repr=False, compare=False)
    #: Running rows of this job, still within their lease, seen by the last attempt.
    live_runs: int = field(default=0, repr=False, compare=False)
    #: Its claim found the tick taken: waiting for the lock would change nothing.
    tick_done: bool = field(default=False, repr=False, compare=False)
    #: ``(status, error text)`` once the job has ended; read by the release statement.
    outcome: tuple[str, str] | None = field(default=None, repr=False, compare=False)
    #: The body has ended (returned or raised, after its last attempt): from then on a lost
    #: lock stops nothing, the run's end being recorded.
    body_ended: bool = field(default=False, repr=False, compare=False)
    #: How many times the body was called (more than once when failures were retried),
    #: and a line for each attempt that failed before the last one.
    attempts: int = field(default=1, repr=False, compare=False)
    failed_attempts: list[str] = field(default_factory=list, repr=False, compare=False)
    #: What the run captured (its job's log records, a command's output), if it captures.
    output: str = field(default="", repr=False, compare=False)
    #: Why the run's end could not be recorded (the database refused writes), if it could not:
    #: its row still says ``running`` until a later claim of the job ends it.
    unrecorded: str = field(default="", repr=False, compare=False)
    #: Its lock is held on a connection shared with other runs' locks (claimed together):
    #: its release unlocks that one lock only.
    shared: bool = field(default=False, repr=False, compare=False)
    #: The keys of its job's run slots, when the job may run several times at once: its claim
    #: takes the first free, and its lock is that one's from then on.
    slots: tuple[LockKey, ...] = field(default=(), repr=False, compare=False)
    #: Why its tick waits, or was skipped by its overlap policy's bound (``buffer_one``,
    #: ``buffer_all``): its row's text; empty for every other run.
    waited: str = field(default="", repr=False, compare=False)
    #: Its job's ``overlap="cancel_other"``: its heartbeat also reads whether a new run asked
    #: it to stop.
    watch_stop: bool = field(default=False, repr=False, compare=False)

    @property
    def ran(self) -> bool:
        """True when the job's function was called."""
        return self.status in (
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.LOCK_LOST,
            RunStatus.TIMED_OUT,
        )

    @property
    def skipped_tick(self) -> bool:
        """True when the job did not run because its tick already ran."""
        return self.status == RunStatus.SKIPPED_TICK

    @property
    def skipped(self) -> bool:
        return self.status in (
            RunStatus.SKIPPED_LOCKED,
            RunStatus.SKIPPED_TICK,
            RunStatus.SKIPPED_PAUSED,
        )

    @property
    def status_label(self) -> str:
        return str(RunStatus(self.status).label)

    def reraise(self) -> Run:
        """Raise what ended the run (the job's exception, a signal), if anything; else return
        the result. The run is recorded either way."""
        if self.error is not None:
            raise self.error
        return self

    def reraise_in_task(self) -> Run:
        """[reraise][django_advisory_cron.run.history.Run.reraise] for a task worker: what the
        job's own code raised that is not an ``Exception`` (``SystemExit``, ...) is raised as
        ``JobFailed`` chained to it, so the worker records a failed task instead of stopping
        (its retry finds the tick taken)."""
        error = self.error
        if self.status == RunStatus.FAILED and not isinstance(error, (Exception, type(None))):
            raise JobFailed(
                f"job {self.job!r} failed: it raised {type(error).__name__} (run {self.run_id} "
                "recorded as failed)"
            ) from error
        return self.reraise()

    # -- statements for the lock ---------------------------------------------------------

    @property
    def held_by(self) -> AdvisoryLock:
        """The lock its statements go through (set before its claim)."""
        assert self.lock is not None
        return self.lock

    def acquire(self, final: bool) -> Statement:
        if self.once and self.held_by.in_transaction:
            raise LockScopeError(
                f"job {self.job!r} is at_most_once, which needs a session lock, but its "
                "lock resolved to transaction scope (a transaction pooler is in the path): "
                "point ADVISORY_CRON['LOCK_DATABASE'] at a direct connection"
            )
        return claim([self], final=final)

    def claim(self) -> sql.Claim:
        """What this run asks of [claim][django_advisory_cron.run.history.claim]."""
        return sql.Claim(
            self.job,
            self.held_by.key,
            self.matches,
            self.reference,
            self.manual,
            self.task_id,
            self.once,
            self.slots,
        )

    def accept(self, row: Row, send: Send) -> bool:
        """Read its row of [claim][django_advisory_cron.run.history.claim]: whether the lock is
        held now (a lock the claim already released, its tick found taken, is not)."""
        released, got, run_id, self.tick, reference, interrupted, self.live_runs, self.paused = row[
            :8
        ]
        if row[8] is not None:
            self.held_by.rekey(self.slots[row[8] - 1])
        if self.reference is None:
            self.reference = reference
        self.interrupted_runs += int(interrupted)
        if got and run_id is None and interrupted and not self.once:
            # The row just marked interrupted may hold this tick: inside one statement its old
            # version still conflicts, so claim the tick again now that it has been given back.
            claimed = send(
                sql.claim_tick(
                    job=self.job,
                    host=HOST,
                    pid=self.pid,
                    tick=self.tick,
                    lease=self.row_lease,
                    task_id=self.task_id,
                    synchronous_commit=self.synchronous_commit,
                )
            )
            run_id = None if claimed is None else claimed[0]
        self.run_id = None if run_id is None else int(run_id)
        self.tick_done = bool(got) and self.run_id is None
        return bool(got) and not released

    @property
    def row_lease(self) -> float | None:
        """The lease its row carries: only session-scoped rows have one (transaction-scoped
        ones are invisible to other replicas until they commit, finished)."""
        return None if self.held_by.in_transaction else self.lease

    def release(self, error: BaseException | None) -> Statement | None:
        key, scope = self.held_by.key, self.held_by.scope
        assert scope is not None
        if self.tick_done and not self.record_skips:
            return sql.release_lock(key, scope, shared=self.shared)
        if self.tick_done:
            return sql.skip_tick(
                key,
                scope,
                job=self.job,
                host=HOST,
                pid=self.pid,
                tick=self.tick,
                task_id=self.task_id,
                shared=self.shared,
            )
        assert self.run_id is not None  # taken, and the tick not done: the row is ours
        # No outcome yet: the job's code never ran (taking the lock was cut short).
        status, text = self.outcome or (
            status_of(error, body=False),
            error_text(error, body=False) if error else "",
        )
        return sql.finish_run(
            key,
            scope,
            run_id=self.run_id,
            status=status,
            error=text,
            attempts=self.attempts,
            output=self.output,
            shared=self.shared,
            synchronous_commit=self.synchronous_commit,
        )

    def beat(self) -> Statement:
        """Its lock's heartbeat: its lease renewed while its lock (its slot's) is held."""
        key = self.held_by.key
        if self.run_id is None:
            return sql.lock_held(key)
        return sql.renew_leases([(self.run_id, key)], lease=self.lease, watch=self.watch_stop)

    # -- recording without the lock connection ------------------------------------------

    def mark_lost(self, error_line: str) -> bool:
        """Mark the running row ``lock_lost`` at once. Its body may still be running, so the
        row keeps its lease (no longer renewed): other replicas wait for it to expire, or for
        ``finish_lost`` to record the body's end, which ends it."""
        if self.run_id is None:
            return False
        statement = sql.mark_lock_lost(
            run_id=self.run_id, job=self.job, host=HOST, pid=self.pid, error=error_line
        )
        assert self.using is not None
        return execute_fresh(self.using, statement, patience=app_settings.HEARTBEAT)

    def finish_lost(self, status: str, text: str) -> bool:
        """Record the end of a run whose lock was lost (or whose holder is going away), through
        a fresh connection: its row is finished, with its attempts and output so far, or
        written again if it rolled back with its lost connection (transaction scope)."""
        statement = sql.record_lost_run(
            run_id=self.run_id,
            job=self.job,
            host=HOST,
            pid=self.pid,
            tick=self.tick,
            status=status,
            error=text,
            attempts=self.attempts,
            output=self.output,
            task_id=self.task_id,
        )
        assert self.using is not None
        return execute_fresh(self.using, statement, patience=FINISH_PATIENCE)

    def fail_committed(self, text: str) -> bool:
        """A committed run whose ``on_commit`` callback raised: mark it failed."""
        if self.run_id is None:
            return False
        statement = sql.fail_committed_run(run_id=self.run_id, error=text)
        assert self.using is not None
        return execute_fresh(self.using, statement, patience=FINISH_PATIENCE)


def new_run(
    job: str,
    status: RunStatus = RunStatus.SKIPPED_LOCKED,
    *,
    run_id: int | None = None,
    tick: datetime | None = None,
    manual: bool = False,
    using: str | None = None,
    task_id: str = "",
    value: Any = None,
    error: BaseException | None = None,
    matches: list[tuple[datetime, datetime]] | None = None,
    reference: datetime | None = None,
    max_skew: float = 0,
    once: bool = False,
    slots: tuple[LockKey, ...] = (),
) -> Run:
    """The one place a [Run][django_advisory_cron.run.history.Run] is made: one about to
    claim its tick (a skip until its claim says otherwise), or one another process recorded,
    read back (a worker's child process, a send recorded as its tick's run)."""
    return Run(
        job,
        status,
        value,
        error,
        run_id=run_id,
        tick=tick,
        manual=manual,
        using=using,
        task_id=task_id,
        matches=matches or [],
        reference=reference,
        max_skew=max_skew,
        once=once,
        slots=slots if len(slots) > 1 else (),
    )


def claim(runs: Sequence[Run], *, final: bool, census: str | None = None) -> Statement:
    """The statement taking the locks and claiming the ticks of ``runs`` (records of this
    process, with one lease and one ``max_skew``, their locks of one scope):
    [claim_runs][django_advisory_cron.db.sql.claim_runs]. A lock that outlives transactions
    is settled: given back at once when its tick is found taken."""
    first = runs[0]
    lock = first.held_by
    assert lock.scope is not None
    return sql.claim_runs(
        [run.claim() for run in runs],
        lock.scope,
        host=HOST,
        pid=first.pid,
        max_skew=first.max_skew,
        lease=first.row_lease,
        final=final,
        settle=not sql.ends_with_transaction(lock.scope),
        record_skips=first.record_skips,
        census=census,
        synchronous_commit=first.synchronous_commit,
    )


# -- runs in a worker's child processes ----------------------------------------------------


def child_run(alias: str, *, job: str, tick: datetime | None, pid: int) -> Run:
    """The run a worker's child process (``pid``, this host) recorded for ``tick``, read back
    from its row: a failed run with no id when it recorded none."""
    row = fetch_fresh(
        alias, sql.child_run(job=job, host=HOST, pid=pid, tick=tick), patience=FINISH_PATIENCE
    )
    run_id, status = (None, RunStatus.FAILED) if row is None else (int(row[0]), str(row[1]))
    return new_run(job, RunStatus(status), run_id=run_id, tick=tick)


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


def runs_of(
    connection: BaseDatabaseWrapper | str, names: Iterable[str], besides: int | None = None
) -> dict[str, int]:
    """How many runs of their ticks each of ``names`` has had (``max_runs``), in one statement
    (but the run ``besides``): counted from the history, not kept in a counter, so nothing
    else is written and an operator who deletes runs gives them back. A worker's count before
    it claims can be one run behind; the runner counts again under the job's lock, which
    serialises its runs, so ``max_runs=2`` on two replicas runs exactly twice."""
    names = list(names)
    if not names:
        return {}
    rows = fetch_all(connection, others.ticked_runs(names, besides))
    return {job: int(count) for job, count in rows}
