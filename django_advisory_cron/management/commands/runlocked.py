"""``manage.py runlocked <job> [args...]``: run a job (or any command) once across replicas."""

from __future__ import annotations

import argparse
import inspect
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

from django.core.management import call_command, get_commands
from django.core.management.base import CommandParser
from django.db import ProgrammingError

from ... import delivery, exitcodes, signals
from ...conf import app_settings
from ...exceptions import (
    DatabaseUnavailable,
    InvalidSchedule,
    JobTimedOut,
    LockDatabaseError,
    LockLost,
    LockScopeError,
)
from ...jobs import Job, registry
from ...lockconn import bound_connect
from ...models import RunStatus
from ...runner import RunResult, execute
from ...scopes import SCOPES
from ..base import AppCommand, did_you_mean

EPILOG = """\
exit codes:
  0    the job ran, or was skipped (locked elsewhere, this tick already ran, or the job is
       paused: its tick is recorded as skipped_paused); with --enqueue: the tick was
       enqueued, or another scheduler had enqueued it
  1    the job raised; the run is recorded as failed and the traceback logged
  2    usage error: unknown job, bad arguments, invalid schedule
  69   the lock database cannot be reached
  75   the lock's connection was lost while the job ran
  78   configuration error: the lock database is not PostgreSQL, or misused scope; with
       --enqueue: no Tasks framework, unknown backend, or a backend that refuses the task
  124  the job ran past its timeout: stopped, recorded as timed out, lock released
  N    with --conflict-exit-code N: skipped because another process holds the lock
  130  interrupted by SIGINT, 143 by SIGTERM (run marked interrupted, lock released)
"""


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM so the run unwinds, records and unlocks."""


#: Sent to our own main thread when the heartbeat finds the lock lost: a run in its own
#: process stops at once, not at its next database query.
LOST_SIGNAL = signal.SIGUSR1


@contextmanager
def signals_unwind(timeout: float | None = None) -> Iterator[None]:
    """SIGTERM and SIGINT raise in the main thread, so the run records and unlocks; a lost
    lock raises ``LockLost`` there; ``timeout`` seconds after the start, SIGALRM raises
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

    def lost(signum: int, frame: FrameType | None) -> None:
        raise LockLost("the lock's connection was lost; stopping this run")

    main = threading.main_thread().ident

    def stop_main(**kwargs: Any) -> None:
        if main is not None:
            signal.pthread_kill(main, LOST_SIGNAL)

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, terminate),
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
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
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def outcome(
    name: str, ended: RunResult | BaseException, conflict_exit_code: int | None
) -> tuple[int, str]:
    """The exit code and the line to print for how a run ended: the one mapping.

    A [RunResult][django_advisory_cron.runner.RunResult] is mapped from its recorded status;
    an exception means nothing could be recorded (configuration, database, schedule).
    """
    if isinstance(ended, RunResult):
        return _from_result(name, ended, conflict_exit_code)
    first = (str(ended).strip().splitlines() or [type(ended).__name__])[0]
    if isinstance(ended, InvalidSchedule):
        return exitcodes.USAGE, f"job {name!r}: {first}"
    if isinstance(ended, DatabaseUnavailable):
        return exitcodes.DATABASE_UNAVAILABLE, first
    if isinstance(ended, (LockDatabaseError, LockScopeError)):
        return exitcodes.CONFIG, first
    if isinstance(ended, ProgrammingError):
        return exitcodes.CONFIG, (
            f"job {name!r} could not start: {first} (is the run-history table missing? run "
            "manage.py migrate)"
        )
    return exitcodes.JOB_FAILED, f"job {name!r} could not start: {first} (nothing recorded)"


def _from_result(name: str, result: RunResult, conflict_exit_code: int | None) -> tuple[int, str]:
    status, run, error = result.status, f"run {result.run_id}", result.error
    if isinstance(error, JobTimedOut):
        if status == RunStatus.TIMED_OUT or not result.run_id:
            recorded = f"{run} recorded as timed out" if result.run_id else "nothing recorded"
            return exitcodes.TIMED_OUT, f"{name}: {error} ({recorded}; lock released)"
        error = None  # the time ran out as the run was being recorded: it ended as recorded
    if error is not None and not isinstance(error, Exception):
        # A signal: the exit code says so, the message says what the history holds.
        by = "SIGTERM" if isinstance(error, Terminated) else "SIGINT"
        code = exitcodes.SIGTERM if by == "SIGTERM" else exitcodes.SIGINT
        if status != RunStatus.INTERRUPTED:
            recorded = f"after {run} was recorded as {result.status_label}"
        elif result.run_id:
            recorded = f"{run} recorded as interrupted"
        else:
            recorded = "nothing recorded"
        return code, f"{name} interrupted by {by} ({recorded}; lock released)"
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
    described = f"{type(error).__name__}: {error}" if error is not None else "failed"
    return exitcodes.JOB_FAILED, (
        f"job {name!r} failed: {described} (traceback logged; {run} recorded as failed)"
    )


def _command_job(command: str, arguments: list[str]) -> Job[[], Any]:
    """A job (not registered) that wraps a management command under the command's name."""

    def run_command() -> Any:
        return call_command(command, *arguments)

    run_command.__qualname__ = run_command.__name__ = command
    job: Job[[], Any] = Job(func=run_command, name=command, description=f"manage.py {command}")
    return job


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Run a registered job, or any management command, under its PostgreSQL advisory lock: "
        "exactly one replica runs it, the others skip at once (or wait with --wait)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job", nargs="?", help="a registered job, or a management command")
        parser.add_argument(
            "job_args",
            nargs=argparse.REMAINDER,
            metavar="ARGS",
            help="passed to the job function (as strings) or the management command",
        )
        parser.add_argument(
            "-w",
            "--wait",
            type=float,
            default=None,
            metavar="SECONDS",
            help="wait up to SECONDS for the lock instead of skipping at once",
        )
        parser.add_argument(
            "--scope", choices=SCOPES, default=None, help="lock scope (default: the job's)"
        )
        parser.add_argument(
            "--database", default=None, metavar="ALIAS", help="database alias holding the lock"
        )
        parser.add_argument(
            "-E",
            "--conflict-exit-code",
            type=int,
            default=None,
            metavar="N",
            help="exit with N instead of 0 when skipped because the lock is held elsewhere",
        )
        parser.add_argument(
            "--enqueue",
            action="store_true",
            help="enqueue the job to its Tasks backend (its deliver=, else the default backend) "
            "instead of running it here; once per tick across every scheduler",
        )
        parser.add_argument("--list", action="store_true", help="list registered jobs and exit")
        # Internal: cronworker runs a job in a child process for the tick it is due at.
        parser.add_argument("--tick", default=None, help=argparse.SUPPRESS)
        # Internal: cronworker runs a "run now" request in a child process: no tick.
        parser.add_argument("--manual", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list()
            return
        name = options["job"]
        if not name:
            self.leave(exitcodes.USAGE, "name a job to run (or use --list)")
        if options["wait"] is not None and options["wait"] < 0:
            self.leave(exitcodes.USAGE, "--wait must be >= 0 seconds")
        tick = self._tick(options["tick"])
        job, arguments = self._find(name, options["job_args"])
        alias = options["database"] or job.using or app_settings.lock_database
        if options["enqueue"]:
            self._enqueue(job, arguments, alias, options["verbosity"])
            return
        ended: RunResult | BaseException
        try:
            bound_connect(alias)
            with signals_unwind(job.timeout):
                ended = execute(
                    job,
                    args=tuple(arguments),
                    now=tick,
                    scope=options["scope"],
                    wait=options["wait"],
                    using=options["database"],
                    manual=options["manual"],
                )
        except Exception as error:
            ended = error
        code, message = outcome(job.name, ended, options["conflict_exit_code"])
        if code == exitcodes.OK:
            if options["verbosity"] >= 1:
                self.stdout.write(message)
            return
        self.leave(code, message)

    def _tick(self, value: str | None) -> datetime | None:
        if value is None:
            return None
        try:
            tick = datetime.fromisoformat(value)
        except ValueError:
            tick = None
        if tick is None or tick.tzinfo is None:
            self.leave(exitcodes.USAGE, f"--tick needs an ISO 8601 time with an offset: {value!r}")
        return tick

    def _enqueue(
        self, job: Job[Any, Any], arguments: list[str], alias: str, verbosity: int
    ) -> None:
        """Hand the tick nearest the database's clock to the job's Tasks backend."""
        if job.name not in registry:
            self.leave(
                exitcodes.USAGE,
                f"--enqueue needs a registered job; {job.name!r} is a management command "
                "(task workers could not find it)",
            )
        try:
            deliverer = delivery.deliverer_for(job) or delivery.deliverer_for_scheme("tasks")
            problems = deliverer.problems(job)
            if problems:
                raise delivery.DeliveryError(problems[0])
            bound_connect(alias)
            handed = deliverer.deliver(job, None, args=arguments, using=alias)
        except delivery.DeliveryError as error:
            self.leave(exitcodes.CONFIG, str(error))
        except InvalidSchedule as error:
            self.leave(exitcodes.USAGE, f"job {job.name!r}: {error}")
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(error))
        tick = f"tick {handed.tick}" if handed.tick else "no tick"
        if handed.enqueued:
            message = (
                f"{job.name}: enqueued ({tick}) to Tasks backend {handed.target!r} as task "
                f"{handed.task_id}"
            )
        else:
            message = f"{job.name}: not enqueued, {tick} was already enqueued by another scheduler"
        if verbosity >= 1:
            self.stdout.write(message)

    def _list(self) -> None:
        jobs = registry.all()
        if not jobs:
            self.stdout.write("No jobs are registered.")
            return
        width = max(len(job.name) for job in jobs)
        for job in jobs:
            runtime = f"{job.max_runtime:g}s" if job.max_runtime else "-"
            self.stdout.write(
                f"{job.name:<{width}}  {job.schedule_text or '(no schedule)':<15}  "
                f"scope={job.scope:<11}  max_runtime={runtime:<6}  key={job.key}"
            )

    def _find(self, name: str, arguments: list[str]) -> tuple[Job[Any, Any], list[str]]:
        if name in registry:
            job = registry.get(name)
            try:
                inspect.signature(job.func).bind(*arguments)
            except TypeError as error:
                self.leave(
                    exitcodes.USAGE, f"job {name!r} does not take arguments {arguments}: {error}"
                )
            return job, arguments
        if name in get_commands():
            return _command_job(name, arguments), []
        candidates = [job.name for job in registry.all()] + sorted(get_commands())
        hint = did_you_mean(name, candidates, "see runlocked --list")
        self.leave(exitcodes.USAGE, f"no job or command named {name!r}{hint}")
