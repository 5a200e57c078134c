"""``manage.py runlocked <job> [args...]``: run a job (or any command) once across replicas."""

from __future__ import annotations

import argparse
import difflib
import inspect
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import exitcodes
from ...exceptions import (
    DatabaseUnavailable,
    InvalidSchedule,
    LockDatabaseError,
    LockNotAcquired,
    LockScopeError,
)
from ...jobs import Job, registry
from ...locks import SCOPES
from ...models import RunStatus

EPILOG = """\
exit codes:
  0    the job ran, or was skipped (locked elsewhere, or this tick already ran)
  1    the job raised; the run is recorded as failed and the traceback logged
  2    usage error: unknown job, bad arguments, invalid schedule
  69   the lock database cannot be reached
  75   the lock's connection was lost while the job ran
  78   configuration error: the lock database is not PostgreSQL, or misused scope
  N    with --conflict-exit-code N: skipped because another process holds the lock
  130  interrupted by SIGINT, 143 by SIGTERM (run marked interrupted, lock released)
"""


class RunlockedError(CommandError):
    """A failure with its exit code; Django prints ``ClassName: message`` and exits."""

    def __init__(self, message: str, returncode: int) -> None:
        super().__init__(message, returncode=returncode)


class UnknownJobError(RunlockedError):
    pass


class DatabaseUnreachable(RunlockedError):
    pass


class ConfigurationError(RunlockedError):
    pass


class Locked(RunlockedError):
    pass


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM so the run unwinds, records and unlocks."""


@contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGINT raise in the main thread, so the run records and unlocks.

    SIGINT is installed explicitly: a process started in the background by a shell inherits
    SIGINT ignored, and Python then never raises ``KeyboardInterrupt``.
    """

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    previous_term = signal.signal(signal.SIGTERM, terminate)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


def _command_job(command: str, arguments: list[str]) -> Job[[], Any]:
    """A job (not registered) that wraps a management command under the command's name."""

    def run_command() -> Any:
        return call_command(command, *arguments)

    run_command.__qualname__ = run_command.__name__ = command
    job: Job[[], Any] = Job(func=run_command, name=command, description=f"manage.py {command}")
    return job


class Command(BaseCommand):
    help = (
        "Run a registered job, or any management command, under its PostgreSQL advisory lock: "
        "exactly one replica runs it, the others skip at once (or wait with --wait)."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = EPILOG
        return parser

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
        parser.add_argument("--list", action="store_true", help="list registered jobs and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list()
            return
        name = options["job"]
        if not name:
            raise UnknownJobError("name a job to run (or use --list)", exitcodes.USAGE)
        if options["wait"] is not None and options["wait"] < 0:
            raise RunlockedError("--wait must be >= 0 seconds", exitcodes.USAGE)
        job = self._find(name, options["job_args"])
        self._run(job, options)

    def _list(self) -> None:
        jobs = registry.all()
        if not jobs:
            self.stdout.write("No jobs are registered.")
            return
        width = max(len(job.name) for job in jobs)
        for job in jobs:
            runtime = f"{job.max_runtime:g}s" if job.max_runtime else "-"
            self.stdout.write(
                f"{job.name:<{width}}  {job.cron or '(no schedule)':<15}  "
                f"scope={job.scope:<11}  max_runtime={runtime:<6}  key={job.key}"
            )

    def _find(self, name: str, arguments: list[str]) -> tuple[Job[Any, Any], list[str]]:
        if name in registry:
            job = registry.get(name)
            try:
                inspect.signature(job.func).bind(*arguments)
            except TypeError as error:
                raise RunlockedError(
                    f"job {name!r} does not take arguments {arguments}: {error}", exitcodes.USAGE
                ) from None
            return job, arguments
        if name in get_commands():
            return _command_job(name, arguments), []
        candidates = [job.name for job in registry.all()] + sorted(get_commands())
        close = difflib.get_close_matches(name, candidates, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see runlocked --list"
        raise UnknownJobError(f"no job or command named {name!r}{hint}", exitcodes.USAGE)

    def _run(self, found: tuple[Job[Any, Any], list[str]], options: dict[str, Any]) -> None:
        job, arguments = found
        try:
            with _signals_unwind():
                result = job.run(
                    *arguments,
                    scope=options["scope"],
                    wait=options["wait"],
                    using=options["database"],
                )
        except InvalidSchedule as error:
            raise RunlockedError(f"job {job.name!r}: {error}", exitcodes.USAGE) from None
        except DatabaseUnavailable as error:
            raise DatabaseUnreachable(str(error), exitcodes.DATABASE_UNAVAILABLE) from None
        except (LockDatabaseError, LockScopeError) as error:
            raise ConfigurationError(str(error), exitcodes.CONFIG) from None
        except LockNotAcquired as error:
            raise Locked(str(error), options["conflict_exit_code"] or 0) from None
        except Terminated:
            self.stderr.write(f"runlocked: {job.name} interrupted by SIGTERM")
            sys.exit(exitcodes.SIGTERM)
        except KeyboardInterrupt:
            self.stderr.write(f"runlocked: {job.name} interrupted by SIGINT")
            sys.exit(exitcodes.SIGINT)
        except Exception as error:
            raise RunlockedError(
                f"job {job.name!r} failed: {type(error).__name__}: {error} "
                "(traceback logged; run recorded as failed)",
                exitcodes.JOB_FAILED,
            ) from None
        self._report(job, result, options)

    def _report(self, job: Job[Any, Any], result: Any, options: dict[str, Any]) -> None:
        verbose = options["verbosity"] >= 1
        if result.status == RunStatus.SKIPPED_LOCKED:
            code = options["conflict_exit_code"]
            message = f"{job.name}: skipped, locked by another process"
            if code:
                raise Locked(message, code)
            if verbose:
                self.stdout.write(message)
        elif result.status == RunStatus.SKIPPED_TICK:
            if verbose:
                self.stdout.write(f"{job.name}: skipped, tick {result.tick} already ran")
        elif result.status == RunStatus.LOCK_LOST:
            raise RunlockedError(
                f"{job.name}: the lock's connection was lost while the job ran; another "
                "replica may have run it too",
                exitcodes.LOCK_LOST,
            )
        elif verbose:
            tick = f"tick {result.tick}" if result.tick else "no tick"
            self.stdout.write(f"{job.name}: ran (run {result.run_id}, {tick})")
