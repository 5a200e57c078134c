"""Run one job: take its lock, claim its tick, run it, record the outcome, release.

The order of one run, top to bottom: the job's
[AdvisoryLock][django_advisory_cron.lock.advisory.AdvisoryLock] sends the
[Run][django_advisory_cron.run.history.Run]'s statements (claim the tick and insert
the row while taking the lock; finish the row while releasing it); the runner only calls the
job and decides the outcome. Every outcome, failures and signals included, is a
[RunResult][django_advisory_cron.RunResult]:
[execute][django_advisory_cron.run.runner.execute] returns it, and ``result.reraise()`` raises
what the job raised (as ``Job.run`` does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import InterfaceError, OperationalError

from .. import signals
from ..conf import app_settings
from ..core.keys import LockKey
from ..core.moments import tick_said
from ..core.schedule_rules import max_runs_ended
from ..core.scopes import Scope
from ..core.statuses import RunStatus
from ..core.text import storable
from ..db.aliases import lock_database
from ..db.connections import refused_value
from ..exceptions import (
    DatabaseReadOnly,
    JobTimedOut,
    LockLost,
    first_line,
    stopping_signal,
)
from ..lock import polling
from ..lock.advisory import AdvisoryLock
from ..lock.heartbeat import lost_text
from ..lock.shared import ClaimConnection, SharedLock
from . import attempts, handlers, history, output

logger = logging.getLogger("django_advisory_cron")


LOST_IN_TRANSACTION = (
    "the connection holding the transaction-scoped lock was lost; the job's database work was "
    "rolled back"
)


class OverlapPolicy(Protocol):
    """What a job's overlap policy does around its runs (see
    [overlap][django_advisory_cron.jobs.overlap]): the runner asks it, and knows no policy."""

    def start(
        self,
        job: RunnableJob,
        alias: str,
        once: Callable[[datetime | None], history.Run],
        now: datetime | None,
        keep_going: Callable[[], bool] | None,
        *,
        manual: bool,
    ) -> history.Run: ...

    def before_claim(self, job: RunnableJob, run: history.Run, around: datetime) -> None: ...

    def claimed(self, job: RunnableJob, run: history.Run) -> None: ...


class RunnableJob(attempts.Body, Protocol):
    """What the runner needs of a job (a [Job][django_advisory_cron.jobs.job.Job]): what
    calling its body needs, and its lock's and its run's settings."""

    @property
    def scope(self) -> Scope: ...

    @property
    def wait(self) -> float: ...

    @property
    def using(self) -> str | None: ...

    @property
    def key(self) -> LockKey: ...

    @property
    def keys(self) -> tuple[LockKey, ...]: ...

    @property
    def overlap(self) -> str: ...

    @property
    def policy(self) -> OverlapPolicy: ...

    @property
    def at_most_once(self) -> bool: ...

    @property
    def capture(self) -> tuple[str, ...] | None: ...

    @property
    def max_runs(self) -> int | None: ...


#: What [execute][django_advisory_cron.run.runner.execute] returns: the run, how it ended.
RunResult = history.Run


def execute(
    job: RunnableJob,
    *,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    scope: Scope | None = None,
    wait: float | None = None,
    using: str | None = None,
    manual: bool = False,
    task_id: str = "",
    keep_going: Callable[[], bool] | None = None,
) -> RunResult:
    """Run ``job`` once under its lock and return what happened, failures included.

    ``manual`` is a "run now": recorded as manual, with no tick (it never takes or shifts
    one), and run even while the job is paused; it is still refused while the lock is held.
    ``task_id`` is the task result id when a task queue delivered the run; the run's row
    (or its skip) records it.

    A job with ``overlap="buffer_one"`` or ``"buffer_all"`` whose tick finds it busy records
    the tick as waiting (the result's status says ``waiting``, or a skip when the bound is
    reached, and ``waited`` says why); one whose run ends here starts the ticks waiting then,
    oldest first, one after another, while ``keep_going()`` says so (see
    [overlap][django_advisory_cron.jobs.overlap]). The result is the first run's.

    Raises only when nothing could be recorded: an invalid schedule, a lock database that is
    not PostgreSQL or cannot be reached, a scope that cannot be used here.
    """
    alias = lock_database(using, job.using)

    def once(at: datetime | None) -> RunResult:
        return _execute(job, alias, args, kwargs, at, scope, wait, manual=manual, task_id=task_id)

    return job.policy.start(job, alias, once, now, keep_going, manual=manual)


def _execute(
    job: RunnableJob,
    alias: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    now: datetime | None,
    scope: Scope | None,
    wait: float | None,
    *,
    manual: bool,
    task_id: str,
) -> RunResult:
    """One run of ``job`` (see [execute][django_advisory_cron.run.runner.execute])."""
    schedule = job.schedule
    max_skew = app_settings.MAX_SKEW
    around = now or datetime.now().astimezone()
    run = history.new_run(
        job.name,
        matches=schedule.matches(around, max_skew) if schedule and not manual else [],
        max_skew=max_skew,
        reference=now,
        manual=manual,
        using=alias,
        task_id=task_id,
        once=job.at_most_once,
        slots=job.keys,
    )
    lock = run.lock = AdvisoryLock(
        job.key,
        scope=scope or job.scope,
        wait=job.wait if wait is None else wait,
        using=alias,
        beat=run.beat,
        on_lost=_on_lost(job, run),
        savepoint=True,
        whole_statements=True,
    )
    job.policy.before_claim(job, run, around)
    with handlers.signals_stop_runs():
        try:
            # Each attempt sends the run's claim through the lock's holder and reads its row;
            # a loser that found its tick taken (settled) has nothing to wait for.
            for attempt in polling.attempts(lock):
                assert lock.holder is not None
                with lock.holder.attempt():
                    row = lock.holder.try_first(run.acquire(attempt.final))
                    assert row is not None
                    lock.acquired = run.accept(row, lock.holder.follow_up)
                attempt.settled = run.tick_done
        except BaseException as stop:
            _release(run, lock, stop)
            if isinstance(stop, Exception):
                raise  # nothing was recorded: the caller reports it
            # A signal (or the timeout) while the lock was being taken, before any of the
            # job's code ran; the lock recorded and released the run.
            run.status = RunStatus(history.status_of(stop, body=False))
            run.error = stop
            _log_stop(job, stop, body=False)
            return run
        if _taken(job, lock, run):
            _run(job, lock, run, args, dict(kwargs or {}))
    return run


@dataclass
class ClaimedRun:
    """A run whose lock and tick were claimed together with others', ready to start."""

    job: RunnableJob
    result: RunResult
    lock: SharedLock

    def run(self) -> RunResult:
        """Run the job in this thread, record its outcome, release its lock."""
        self.lock.loss.guard_queries()
        _run(self.job, self.lock, self.result, (), {})
        return self.result

    def abandon(self, why: str) -> None:
        """Record the run as interrupted without starting it, and release its lock."""
        self.result.outcome = (history.INTERRUPTED, why)
        _release(self.result, self.lock)
        self.result.status = RunStatus.INTERRUPTED
        logger.warning("job %s (run %s) not started: %s", self.job.name, self.result.run_id, why)


def claim_together(
    batch: Sequence[tuple[RunnableJob, datetime | None]], claims: ClaimConnection
) -> tuple[list[ClaimedRun], list[RunResult]]:
    """Take the locks and claim the ticks of several jobs (``(job, tick)`` each: session
    scope, no waiting; a tick of ``None`` is a manual run, "run now") in one statement on
    ``claims``. Returns the runs to start, and the results of the jobs skipped (logged and
    signalled like any skip).

    Raises ``DatabaseError`` or ``DatabaseUnavailable`` when the claim failed.
    """
    runs, skipped = [], []
    for job, lock, run in _claim_entries(batch, claims, final=True):
        if _taken(job, lock, run):
            runs.append(ClaimedRun(job, run, lock))
        else:
            skipped.append(run)
    return runs, skipped


def told(
    job: attempts.Named,
    status: RunStatus,
    *,
    tick: datetime | None,
    using: str,
    run_id: int | None = None,
    manual: bool = False,
    value: Any = None,
    error: Exception | None = None,
) -> RunResult:
    """A run this process did not run, told through the signals a run sends: the skip of a
    tick seen claimed by another process before this one tried its lock, or a send to a task
    queue recorded as its tick's run ``run_id`` (for the push monitors: a message sent is a
    run that succeeded, one refused, or whose sender died, one that failed)."""
    run = history.new_run(
        job.name,
        status,
        run_id=run_id,
        tick=tick,
        manual=manual,
        using=using,
        value=value,
        error=error,
    )
    if run.skipped:
        logger.info("job %s skipped: tick %s already claimed by another process", job.name, tick)
        signals.job_skipped.send(sender=job, run=run)
        return run
    signals.job_started.send(sender=job, run=run)
    if error is None:
        signals.job_finished.send(sender=job, run=run)
    else:
        signals.job_failed.send(sender=job, run=run, exception=error)
    return run


def claim_waiting(
    job: RunnableJob,
    tick: datetime | None,
    claims: ClaimConnection,
    *,
    wait: float,
    stop: threading.Event,
) -> ClaimedRun | RunResult:
    """Claim one tick on ``claims`` like
    [claim_together][django_advisory_cron.run.runner.claim_together], trying again for up to
    ``wait`` seconds (or until ``stop``) while another process holds the job's lock: each try
    one short statement on the shared connection, never a wait that would hold it. Returns the
    run to start, or the skip's result."""
    requested = time.monotonic()
    backoff = polling.Backoff(wait, stop)
    while True:
        final = backoff.final
        ((_, lock, run),) = _claim_entries([(job, tick)], claims, final=final)
        lock.requested_at = requested
        if final or lock.acquired or run.tick_done or run.paused is not None:
            if _taken(job, lock, run):
                lock.acquired_at = time.monotonic()
                return ClaimedRun(job, run, lock)
            return run
        _release(run, lock)  # nothing was taken
        backoff.pause()


def _claim_entries(
    batch: Sequence[tuple[RunnableJob, datetime | None]], claims: ClaimConnection, *, final: bool
) -> list[tuple[RunnableJob, SharedLock, RunResult]]:
    """One claiming statement for ``batch`` on ``claims``: each job's lock and run, read from
    its row (a skip is written only on the ``final`` attempt)."""
    entries = []
    for job, tick in batch:
        run = history.new_run(
            job.name,
            matches=[] if tick is None else [(tick, tick)],
            max_skew=app_settings.MAX_SKEW,
            reference=tick,
            manual=tick is None,
            using=claims.alias,
            once=job.at_most_once,
            slots=job.keys,
        )
        run.shared = True
        lock = run.lock = SharedLock(job.key, claims, _on_lost(job, run))
        entries.append((job, lock, run))
    statement = history.claim(
        [run for _job, _lock, run in entries], final=final, census=claims.census
    )
    rows, sent = claims.claim([lock for _job, lock, _run in entries], statement)
    for (_job, lock, run), row in zip(entries, rows, strict=True):
        lock.acquired = run.accept(row, claims.send)
        if lock.acquired and run.run_id is not None:
            claims.hold(lock, run.run_id, sent)
    return entries


def _release(run: RunResult, lock: AdvisoryLock, error: BaseException | None = None) -> None:
    """Release the run's lock with its finishing statement (or its skip's)."""
    ending = run.release(error) if lock.acquired and lock.scope else None
    lock.release(error, ending=ending)


def _on_lost(job: RunnableJob, run: RunResult) -> Callable[[AdvisoryLock, BaseException], None]:
    """What a run does when its lock is lost: mark its row at once, then tell receivers."""

    def on_lost(lock: AdvisoryLock, error: BaseException) -> None:
        run.mark_lost(lost_text(error))
        signals.lock_lost.send(sender=job, run=run, lock=lock, error=error)

    return on_lost


def _taken(job: RunnableJob, lock: AdvisoryLock, run: RunResult) -> bool:
    """After the acquiring statement: whether the run goes ahead (else its skip is done)."""
    if run.interrupted_runs:
        logger.warning("job %s: marked %d dead run(s) interrupted", job.name, run.interrupted_runs)
    if not lock.acquired or run.tick_done:
        _skip(job, lock, run)
        return False
    limit = job.max_runs
    if limit is not None and run.tick is not None and run.using is not None:
        # Counted under the job's lock, which serialises its runs: every earlier one has its
        # row (ours, just claimed, is not counted).
        earlier = history.runs_of(run.using, [job.name], besides=run.run_id)[job.name]
        done = max_runs_ended(limit, earlier)
        if done:
            run.outcome = (RunStatus.SKIPPED_TICK.value, f"its schedule ended {done}")
            _release(run, lock)
            run.status = RunStatus.SKIPPED_TICK
            logger.info("job %s skipped: tick %s: its schedule ended %s", job.name, run.tick, done)
            signals.job_skipped.send(sender=job, run=run)
            return False
    run.status = RunStatus.RUNNING
    job.policy.claimed(job, run)
    return True


def _skip(job: RunnableJob, lock: AdvisoryLock, run: RunResult) -> None:
    _release(run, lock)
    if run.paused is not None:
        run.status = RunStatus.SKIPPED_PAUSED
        logger.info(
            "job %s skipped at %s: %s", job.name, tick_said(run.tick, "no tick"), run.paused
        )
    elif run.tick_done:
        run.status = RunStatus.SKIPPED_TICK
        logger.info("job %s skipped: tick %s already ran", job.name, run.tick)
    elif run.live_runs:
        logger.info("job %s skipped: an earlier run is still alive", job.name)
    else:
        logger.info("job %s skipped: locked by another process", job.name)
    signals.job_skipped.send(sender=job, run=run)


def _run(
    job: RunnableJob,
    lock: AdvisoryLock,
    run: RunResult,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    error: BaseException | None = None
    try:
        # In the try: from here on the row says running, so a stop signal while the start is
        # logged or announced ends the run like one in its body.
        logger.info(
            "job %s started (%s, run %s)",
            job.name,
            tick_said(run.tick, "run now" if run.manual else "no tick"),
            run.run_id,
        )
        signals.job_started.send(sender=job, run=run)
        # Transaction scope: the lock runs this in a savepoint, so a failure rolls the job's
        # work back and its row still commits.
        level = app_settings.CAPTURE_LEVEL
        with output.captured(job.capture, app_settings.CAPTURE_LIMIT, level) as kept:
            try:
                run.value = attempts.call_body(job, lock, run, args, kwargs)
            finally:
                run.body_ended = True
                run.output = "" if kept is None else kept.text()
    except BaseException as raised:
        error = raised
    status = history.status_of(error)
    if lock.loss.stop_asked and status in (history.FAILED, history.INTERRUPTED):
        # Asked to stop by a new run (overlap cancel_other), it stopped: replaced, not failed
        # (its row already says by whom; its tick stays taken).
        status = history.LOCK_LOST
    last = history.error_text(error) if error is not None else ""
    if lock.loss.stop_asked and status == history.SUCCEEDED:
        last = "it returned before it stopped, so it succeeded"  # after the request's note
    text = "\n".join(filter(None, [*run.failed_attempts, last]))
    run.outcome = (status, text)
    late: BaseException | None = None
    try:
        _release(run, lock, error)
    except Exception as failure:
        if refused_value(failure):  # the finish was refused for a text it carried
            status, text = _after_refused_finish(lock, run, failure, status, text)
            if status == history.FAILED:
                error = error or failure
        elif isinstance(failure, DatabaseReadOnly) and not lock.in_transaction:
            # The server was switched read-only as the run ended: the lock is unlocked; its
            # end is recorded if writes come back soon enough, else said, not invented.
            if not run.finish_lost(status, text):
                run.unrecorded = first_line(failure)
        else:  # transaction scope: the finish or the commit failed
            status, text = _after_failed_release(lock, run, failure, text)
            if status == history.LOCK_LOST:
                cause = error if isinstance(error, Exception) else failure
                lost = LockLost(f"{LOST_IN_TRANSACTION} ({first_line(cause)})")
                lost.__cause__ = cause
                error = lost if error is None or isinstance(error, Exception) else error
            error = error or failure
    except BaseException as raised:
        if lock.committed and not _is_stop(raised):
            # Transaction scope: the run committed, then an on_commit callback the job
            # registered raised (SystemExit, GeneratorExit, ...): the job's code failed.
            status, text = _after_failed_release(lock, run, raised, text)
            error = error or raised
        else:
            # SIGINT/SIGTERM held back while the row was being finished: the run is recorded
            # as it ended; the signal is passed on once the report is made.
            late = raised
    if lock.lost and not lock.in_transaction:
        # The job's own failure stays a failure; success, being stopped, or a query that
        # failed because the database went away with the lock (a failover) is a lost lock.
        if status == history.SUCCEEDED or isinstance(error, (LockLost, *CONNECTION_ERRORS)):
            status = history.LOCK_LOST
        run.finish_lost(status, text)
    _report(job, run, RunStatus(status), error)
    if late is not None:
        run.error = late


#: What the job's own queries raise when its database connection is gone.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def _after_refused_finish(
    lock: AdvisoryLock, run: RunResult, failure: Exception, status: str, text: str
) -> tuple[str, str]:
    """Record a run whose finishing statement was refused for a text it carried (one a
    database whose encoding is not UTF-8 cannot hold), through a fresh connection, with its
    error text and output in ASCII, which every database holds; return its status and error
    text. In transaction scope the refusal rolled the lock's transaction back, the job's work
    with it: the run failed."""
    notes = [f"the run's error text and output were stored escaped ({first_line(failure)})"]
    if lock.in_transaction:
        status = history.FAILED
        notes.append("the job's database work was rolled back")
    text = _ascii("\n".join([*notes, text]).strip())
    run.output = _ascii(run.output)
    run.finish_lost(status, text)
    return status, text


def _ascii(text: str) -> str:
    """``text`` as a run row can hold it (see ``storable``), then with every character
    outside ASCII written as its backslash escape: a NUL is ASCII, but its storable form,
    U+FFFD, is not, and a database whose encoding is not UTF-8 refuses it too."""
    return storable(text).encode("ascii", "backslashreplace").decode()


def _after_failed_release(
    lock: AdvisoryLock, run: RunResult, failure: BaseException, text: str
) -> tuple[str, str]:
    """Record a transaction-scoped run whose transaction did not end as planned, through a
    fresh connection; return its status and error text."""
    if lock.committed:
        text = (
            f"the run committed, then an on_commit callback raised:\n{history.error_text(failure)}"
        )
        run.fail_committed(text)
        return history.FAILED, text
    parts = (
        LOST_IN_TRANSACTION,
        text,
        history.error_text(failure),
    )
    text = "\n".join(part for part in parts if part)
    run.finish_lost(history.LOCK_LOST, text)
    return history.LOCK_LOST, text


def _report(
    job: RunnableJob, run: RunResult, status: RunStatus, error: BaseException | None
) -> None:
    run.status, run.error = status, error
    if error is None:
        logger.info("job %s finished%s", job.name, " (lock lost)" if status == "lock_lost" else "")
        signals.job_finished.send(sender=job, run=run)
        return
    if _is_stop(error):
        _log_stop(job, error)
    else:
        # Whatever the job's code raised, SystemExit and KeyboardInterrupt included.
        logger.error("job %s %s", job.name, status.label, exc_info=error)
    signals.job_failed.send(sender=job, run=run, exception=error)


def _is_stop(error: BaseException) -> bool:
    """Whether ``error`` stopped the run from outside (a signal, the job's timeout)."""
    return isinstance(error, JobTimedOut) or stopping_signal(error) is not None


def _log_stop(job: RunnableJob, stop: BaseException, *, body: bool = True) -> None:
    """Log a run ended by a signal or by its timeout."""
    if isinstance(stop, JobTimedOut):
        logger.error("job %s timed out: %s", job.name, stop)
    else:
        by = history.stopped_by(stop, body=body) or "a signal"
        logger.warning("job %s interrupted by %s", job.name, by)
