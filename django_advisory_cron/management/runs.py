"""Running a job in this process, for the commands that do (``runlocked``, ``cronjob trigger
--here``): signals that unwind the run so it records and unlocks, and the one mapping from how
a run ended to an exit code and a line to print."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

from django.db import ProgrammingError

from .. import exitcodes, signals
from ..conf import app_settings
from ..core.moments import UTC
from ..exceptions import (
    DatabaseReadOnly,
    DatabaseUnavailable,
    InvalidSchedule,
    JobTimedOut,
    LockDatabaseError,
    LockLost,
    LockScopeError,
    Terminated,
    first_line,
    stopping_signal,
)
from ..jobs.job import Job
from ..models import RunStatus
from ..run.handlers import raise_sigint
from ..run.runner import RunResult

#: Sent to our own main thread when the heartbeat finds the lock lost: a run in its own
#: process stops at once, not at its next database query.
LOST_SIGNAL = signal.SIGUSR1


@contextmanager
def signals_unwind(timeout: float | None = None) -> Iterator[None]:
    """SIGTERM and SIGINT raise in the main thread (``Terminated``, ``SigintReceived``: stops
    from outside, told apart from what the job raises itself), so the run records and unlocks;
    a lost lock raises ``LockLost`` there; ``timeout`` seconds after the start, SIGALRM raises
    ``JobTimedOut`` (and from then on SIGTERM does too: whoever stops a run that is over its
    timeout stops it for that).

    SIGINT is installed explicitly: a process started in the background by a shell inherits
    SIGINT ignored, and Python then never raises ``KeyboardInterrupt``.
    """
    expired: list[bool] = []

    def terminate(signum: int, frame: FrameType | None) -> None:
        if expired and timeout:
            raise JobTimedOut(timeout)
        raise Terminated()

    def alarm(signum: int, frame: FrameType | None) -> None:
        expired.append(True)
        raise JobTimedOut(timeout or 0)

    told: dict[int, Any] = {}

    def lost(signum: int, frame: FrameType | None) -> None:
        # Only into a body: once it has ended (a loss told late, on a busy machine), the run's
        # end is being recorded, or the run is over, and a raise would cut that short.
        if not all(run is not None and run.body_ended for run in told.values()):
            raise LockLost("the lock's connection was lost; stopping this run")

    main = threading.main_thread().ident
    #: Held while the main thread is told, and while the handlers are put back: a receiver
    #: still running once they are must not send a signal whose handler is gone.
    telling = threading.Lock()
    closed: list[bool] = []

    def stop_main(**kwargs: Any) -> None:
        # Once a run: a lock lost two ways at once (its backend terminated and its row
        # replaced, overlap terminate_other) must not raise again while the run is recorded.
        run = kwargs.get("run")
        with telling:
            if main is not None and id(run) not in told and not closed:
                told[id(run)] = run
                signal.pthread_kill(main, LOST_SIGNAL)

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, terminate),
        signal.SIGINT: signal.signal(signal.SIGINT, raise_sigint),
        LOST_SIGNAL: signal.signal(LOST_SIGNAL, lost),
        signal.SIGALRM: signal.signal(signal.SIGALRM, alarm),
    }
    signals.lock_lost.connect(stop_main, weak=False, dispatch_uid="runlocked-stop-main")
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signals.lock_lost.disconnect(dispatch_uid="runlocked-stop-main")
        with telling:
            closed.append(True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wait_for_start(job: Job[..., Any]) -> datetime | None:
    """For a job with a ``jitter``, started (by cron) at one of its ticks: that tick, the one
    nearest now within ``MAX_SKEW``, once its start (the tick plus its offset, the same on
    every replica) has come; the run then claims that tick, however long the wait. ``None``
    when no tick is that near (a run by hand): it runs at once, as without a jitter. Call it
    inside ``signals_unwind``, so a stop during the wait raises there. A schedule that cannot
    tick waits for nothing: the run says why."""
    if not job.jitter:
        return None
    schedule = job.ticking_schedule
    if schedule is None:
        return None
    now = datetime.now(UTC)
    tick = schedule.nearest_tick(now, app_settings.MAX_SKEW)
    if tick is None:
        return None
    delay = (job.start_of(tick) - now).total_seconds()
    if delay > 0:
        time.sleep(delay)
    return tick


def outcome(
    name: str, ended: RunResult | BaseException, conflict_exit_code: int | None
) -> tuple[int, str]:
    """The exit code and the line to print for how a run ended: the one mapping.

    A [RunResult][django_advisory_cron.RunResult] is mapped from its recorded status;
    an exception means nothing could be recorded (configuration, database, schedule).
    """
    if isinstance(ended, RunResult):
        return _from_result(name, ended, conflict_exit_code)
    first = first_line(ended)
    if isinstance(ended, InvalidSchedule):
        return exitcodes.USAGE, f"job {name!r}: {first}"
    if isinstance(ended, DatabaseReadOnly):
        return exitcodes.DATABASE_UNAVAILABLE, f"{first}; {name} did not run"
    if isinstance(ended, DatabaseUnavailable):
        return exitcodes.DATABASE_UNAVAILABLE, first
    if isinstance(ended, (LockDatabaseError, LockScopeError)):
        return exitcodes.CONFIG, first
    if isinstance(ended, ProgrammingError):
        return exitcodes.CONFIG, (
            f"job {name!r} could not start: {first} (are the app's migrations missing? run "
            "manage.py migrate)"
        )
    return exitcodes.JOB_FAILED, f"job {name!r} could not start: {first} (nothing recorded)"


def _from_result(name: str, result: RunResult, conflict_exit_code: int | None) -> tuple[int, str]:
    status, run, error = result.status, f"run {result.run_id}", result.error
    if result.unrecorded:
        return exitcodes.DATABASE_UNAVAILABLE, (
            f"{name}: {result.status_label}, but its end could not be recorded: "
            f"{result.unrecorded}; {run} says running until a later run of {name} ends it"
        )
    if isinstance(error, JobTimedOut):
        if status == RunStatus.TIMED_OUT or not result.run_id:
            recorded = f"{run} recorded as timed out" if result.run_id else "nothing recorded"
            return exitcodes.TIMED_OUT, f"{name}: {error} ({recorded}; lock released)"
        error = None  # the time ran out as the run was being recorded: it ended as recorded
    if error is not None and stopping_signal(error) is not None:
        # A signal: the exit code says so, the message says what the history holds. (What the
        # job raised itself, SystemExit or KeyboardInterrupt included, is a failure below.)
        by = "SIGTERM" if isinstance(error, Terminated) else "SIGINT"
        code = exitcodes.SIGTERM if by == "SIGTERM" else exitcodes.SIGINT
        if status != RunStatus.INTERRUPTED:
            recorded = f"after {run} was recorded as {result.status_label}"
        elif result.run_id:
            recorded = f"{run} recorded as interrupted"
        else:
            recorded = "nothing recorded"
        return code, f"{name} interrupted by {by} ({recorded}; lock released)"
    if status == RunStatus.WAITING:
        return conflict_exit_code or exitcodes.OK, (
            f"{name}: not run yet, tick {result.tick} {result.waited}; whichever process sees "
            "the job free then starts it (nothing to do)"
        )
    if status == RunStatus.SKIPPED_LOCKED and result.waited:
        return conflict_exit_code or exitcodes.OK, f"{name}: skipped, {result.waited}"
    if status == RunStatus.SKIPPED_LOCKED:
        return conflict_exit_code or exitcodes.OK, f"{name}: skipped, locked by another process"
    if status == RunStatus.SKIPPED_TICK:
        return exitcodes.OK, f"{name}: skipped, tick {result.tick} already ran"
    if status == RunStatus.SKIPPED_PAUSED:
        return exitcodes.OK, f"{name}: skipped, {result.paused} (see manage.py cronjob resume)"
    if status == RunStatus.SUCCEEDED:
        tick = f"tick {result.tick}" if result.tick else "no tick"
        return exitcodes.OK, f"{name}: ran ({run}, {tick})"
    if status == RunStatus.LOCK_LOST:
        return exitcodes.LOCK_LOST, (
            f"{name}: the lock's connection was lost while the job ran ({run} recorded as "
            "lock lost); another replica may run it too"
        )
    described = _described(error)
    return exitcodes.JOB_FAILED, (
        f"job {name!r} failed: {described} (traceback logged; {run} recorded as failed)"
    )


def _described(error: BaseException | None) -> str:
    """What the job raised, for the one line ``runlocked`` prints when it failed."""
    if error is None:
        return "failed"
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if not isinstance(error, Exception):
        # SystemExit, KeyboardInterrupt, GeneratorExit: raised by the job's code, not a signal.
        text += ", raised by the job itself, not by a signal"
    return text
