"""``manage.py runlocked <job> [args...]``: run a job (or any command) once across replicas."""

from __future__ import annotations

import argparse
import inspect
import sys
from datetime import datetime
from typing import Any

from django.core.management import get_commands
from django.core.management.base import CommandParser

from ... import exitcodes
from ...conf import app_settings
from ...core import moments
from ...core.names import did_you_mean
from ...core.scopes import SCOPES
from ...db.connections import bound_connect
from ...db.execute import database_now
from ...delivery import targets
from ...exceptions import DatabaseUnavailable, Interrupted, InvalidSchedule, Terminated
from ...jobs import calendars, fanout
from ...jobs.catalog import Catalog
from ...jobs.job import Job, registry
from ...run.output import call_command_captured
from ...run.runner import RunResult, execute
from ..arguments import EXIT_STATUS, WAIT, text
from ..base import AppCommand, cannot_run
from ..runs import outcome, signals_unwind, wait_for_start

EPILOG = """\
exit codes:
  0    the job ran, or was skipped (locked elsewhere, this tick already ran, the job is
       paused, or its calendar skips the tick's day; a skip writes nothing unless
       RECORD_SKIPS); with --enqueue (and for a
       schedule sent to Celery): the tick was enqueued, or another scheduler had enqueued it
  1    the job raised; the run is recorded as failed and the traceback logged
  2    usage error: unknown job, bad arguments, invalid schedule
  69   the lock database cannot be reached, or is read-only (nothing ran)
  75   the lock's connection was lost while the job ran
  78   configuration error: the lock database is not PostgreSQL, misused scope, the
       run-history table is missing (run migrate), or a system check of
       django-advisory-cron reports an error (one line each; manage.py check shows them
       all; --skip-checks starts anyway); with --enqueue: no Tasks framework, unknown
       backend, a backend that refuses the task, or --manual for a job delivered through
       the Tasks framework (it runs here: runlocked --manual NAME); a Celery broker that does
       not take it
  124  the job ran past its timeout: stopped, recorded as timed out, lock released
  N    with --conflict-exit-code N: skipped because another process holds the lock
  130  interrupted by SIGINT, 143 by SIGTERM (run marked interrupted, lock released)
"""


def _command_job(command: str, arguments: list[str]) -> Job[[], Any]:
    """A job (not registered) that wraps a management command under the command's name."""

    def run_command() -> Any:
        return call_command_captured(command, *arguments)

    run_command.__qualname__ = run_command.__name__ = command
    job: Job[[], Any] = Job(
        func=run_command, name=command, description=f"manage.py {command}", capture=()
    )
    return job


def _tick_hint(job: Job[Any, Any], what: str, took: datetime | None) -> str:
    """For a scheduled job run or enqueued (``what``) from a terminal: the tick it ``took``, if
    any (a tick taken by hand is skipped by the scheduled call it was meant for), and how to
    run the job without taking one."""
    if job.schedule is None:
        return ""
    how = (
        f"To run {job.name} by hand without taking a tick: manage.py runlocked --manual {job.name}"
    )
    if took is None:
        return f"{job.name}: this {what} took no tick. {how}"
    return (
        f"{job.name}: this {what} took tick {took}, the tick of its schedule nearest to now "
        f"(within MAX_SKEW, {app_settings.MAX_SKEW:g} s), so the scheduled call for that tick "
        f"will skip it. {how}"
    )


def _options_first(name: str, arguments: list[str]) -> str:
    """The hint for options given after the job's name (where they are the job's arguments):
    the command line with them before it."""
    first = next((n for n, argument in enumerate(arguments) if argument.startswith("-")), None)
    if first is None:
        return ""
    typed = " ".join([*arguments[first:], name, *arguments[:first]])
    return f"; the options of runlocked go before the job name: manage.py runlocked {typed}"


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Run a registered job, or any management command, under its PostgreSQL advisory lock: "
        "exactly one replica runs it, the others skip at once (or wait with --wait)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "job", nargs="?", type=text, help="a registered job, or a management command"
        )
        parser.add_argument(
            "job_args",
            nargs=argparse.REMAINDER,
            metavar="ARGS",
            help="passed to the job function (as strings) or the management command",
        )
        parser.add_argument(
            "-w",
            "--wait",
            type=WAIT,
            default=None,
            metavar="SECONDS",
            help=f"wait up to SECONDS ({WAIT.bounds}) for the lock instead of skipping at once "
            "(default: the job's wait=, 0 unless it says)",
        )
        parser.add_argument(
            "--scope", choices=SCOPES, default=None, help="lock scope (default: the job's)"
        )
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="database alias holding the lock (default: LOCK_DATABASE)",
        )
        parser.add_argument(
            "-E",
            "--conflict-exit-code",
            type=EXIT_STATUS,
            default=None,
            metavar="N",
            help=f"exit with N ({EXIT_STATUS.bounds}) instead of 0 when skipped because the lock "
            "is held elsewhere",
        )
        parser.add_argument(
            "--enqueue",
            action="store_true",
            help="enqueue the job to its Tasks backend (its deliver=, else the default backend), "
            "or send it to Celery (deliver='celery'), instead of running it here; once per tick "
            "across every scheduler",
        )
        parser.add_argument("--list", action="store_true", help="list registered jobs and exit")
        # Internal: cronworker runs a job in a child process for the tick it is due at.
        parser.add_argument("--tick", default=None, help=argparse.SUPPRESS)
        parser.add_argument(
            "--manual",
            action="store_true",
            help="run it by hand: a manual run never takes a tick, so the scheduled calls "
            "keep theirs (recorded as manual; runs even while the job is paused)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list()
            return
        name = options["job"]
        if not name:
            self.leave(exitcodes.USAGE, "name a job to run (or use --list)")
        tick = self._tick(options["tick"])
        found = self.catalog(options["database"] or app_settings.lock_database)
        job, arguments = self._find(found, name, options["job_args"])
        if not job.enabled and not options["manual"]:
            if options["verbosity"] >= 1:
                self.stdout.write(
                    f"{job.name}: skipped, its schedule is disabled (enable it in the admin or "
                    "with manage.py cronjob edit; --manual runs it anyway)"
                )
            return
        alias = options["database"] or job.using or app_settings.lock_database
        calendar_skips = job.calendar and not options["manual"]
        if calendar_skips and self._off_calendar(job, tick, alias, options["verbosity"]):
            return
        if tick is None and not options["manual"]:
            tick = self._wait_for_start(job)
        if options["enqueue"] or targets.by_name(job.deliver):
            # A schedule that sends a task by name has its body in the queue's workers:
            # running it is sending it.
            self._enqueue(job, tick, arguments, alias, options)
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
        hint = ""
        if isinstance(ended, RunResult) and self._hinted(options):
            hint = _tick_hint(job, "run", ended.tick if ended.ran else None)
        if code == exitcodes.OK:
            if options["verbosity"] >= 1:
                self.stdout.write(message)
            if hint:
                self.stdout.write(hint)
            return
        if hint:
            self.stdout.write(hint)
        self.leave(code, message)

    def _hinted(self, options: dict[str, Any]) -> bool:
        """Whether a person typed this (stdin and stdout are a terminal) without ``--manual``
        and wants to be told what it did with the tick: cron's calls are not at a terminal,
        and print exactly what they always did."""
        return (
            options["verbosity"] >= 1
            and not options["manual"]
            and sys.stdin.isatty()
            and self.stdout.isatty()
        )

    def _tick(self, value: str | None) -> datetime | None:
        if value is None:
            return None
        try:
            tick = datetime.fromisoformat(value)
        except ValueError:
            tick = None
        if tick is None or tick.tzinfo is None or not moments.within(tick):
            self.leave(
                exitcodes.USAGE,
                f"--tick needs an ISO 8601 time with an offset, from {moments.SPAN}: {value!r}",
            )
        return tick

    def _off_calendar(
        self, job: Job[Any, Any], tick: datetime | None, alias: str, verbosity: int
    ) -> bool:
        """Whether ``job``'s calendar skips its tick (the one given, else the tick nearest
        now within ``MAX_SKEW``), said in one line: skipped (exit 0), as on every replica."""
        try:
            bound_connect(alias)
            now = database_now(alias)
            schedule = job.ticking_schedule
            if tick is None and schedule is not None:
                tick = schedule.nearest_tick(now, app_settings.MAX_SKEW)
            if tick is None:
                return False  # no tick: a run by hand, which no calendar stops
            why = calendars.skip_reason(job, tick, alias)
            if why is None:
                return False
            calendars.record_skip(job, tick, why, now, alias)
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(error))
        except (InvalidSchedule, ValueError) as error:
            self.leave(exitcodes.USAGE, f"job {job.name!r}: {error}")
        if verbosity >= 1:
            self.stdout.write(
                f"{job.name}: skipped, tick {tick.isoformat()} is off its calendar "
                f"{job.calendar}: {why}"
            )
        return True

    def _wait_for_start(self, job: Job[Any, Any]) -> datetime | None:
        """The tick a job with a jitter waited for (see ``wait_for_start``); a stop while it
        waits leaves with the signal's exit code, nothing having run."""
        try:
            with signals_unwind():
                return wait_for_start(job)
        except Interrupted as stop:
            by = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
            self.leave(
                exitcodes.SIGTERM if by == "SIGTERM" else exitcodes.SIGINT,
                f"{job.name}: stopped by {by} while waiting for its tick's jitter offset; "
                "nothing ran, the tick is left to the other replicas",
            )

    def _enqueue(
        self,
        job: Job[Any, Any],
        tick: datetime | None,
        arguments: list[str],
        alias: str,
        options: dict[str, Any],
    ) -> None:
        """Hand ``tick`` (``None``: the tick nearest the database's clock) to the job's Tasks
        backend."""
        if job.source == "code" and job.name not in registry:
            self.leave(
                exitcodes.USAGE,
                f"--enqueue needs a registered job; {job.name!r} is a management command "
                "(task workers could not find it)",
            )
        try:
            deliverer = targets.sender_for(job)
            problems = deliverer.problems(job)
            if problems:
                raise targets.DeliveryError(problems[0])
            bound_connect(alias)
            handed = deliverer.deliver(
                job, tick, args=arguments, using=alias, manual=options["manual"]
            )
        except targets.DeliveryError as error:
            self.leave(exitcodes.CONFIG, str(error))
        except InvalidSchedule as error:
            self.leave(exitcodes.USAGE, f"job {job.name!r}: {error}")
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(error))
        said = f"tick {handed.tick}" if handed.tick else "no tick"
        if handed.enqueued:
            message = deliverer.sent(job.name, handed, "manual run" if options["manual"] else said)
        elif handed.paused:  # as runlocked says of a paused job it would run here
            message = f"{job.name}: skipped, {handed.paused}"
        else:
            why = "already ran" if handed.already_ran else "was enqueued by another scheduler"
            message = f"{job.name}: not enqueued, {said} {why}"
        if options["verbosity"] >= 1:
            self.stdout.write(message)
        hint = _tick_hint(job, "enqueue", handed.tick if handed.enqueued else None)
        if hint and self._hinted(options):
            self.stdout.write(hint)

    def _list(self) -> None:
        jobs = self.catalog(app_settings.lock_database).all()
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

    def _find(
        self, found: Catalog, name: str, arguments: list[str]
    ) -> tuple[Job[Any, Any], list[str]]:
        if name not in found:
            # name@schema: one tenant's run of a per-tenant job
            tenant = fanout.tenant_job(found.jobs, name)
            if tenant is not None:
                return tenant, arguments
        if name in found:
            job = found.get(name)
            if job.per_tenant:
                self.leave(
                    exitcodes.USAGE,
                    f"job {name!r} runs per tenant: run one tenant's with runlocked "
                    f"{name}@SCHEMA, or every tenant's with manage.py cronworker",
                )
            try:
                inspect.signature(job.func).bind(*arguments)
            except TypeError as error:
                self.leave(
                    exitcodes.USAGE,
                    f"job {name!r} does not take arguments {arguments} ({error})"
                    + _options_first(name, arguments),
                )
            return job, arguments
        if name in found.broken:  # a stored schedule's name, never a command's of that name
            self.leave(exitcodes.USAGE, cannot_run(name, found.broken[name]))
        if name in get_commands():
            return _command_job(name, arguments), []
        candidates = list(found.jobs) + sorted(get_commands())
        hint = did_you_mean(name, candidates, "see runlocked --list")
        self.leave(exitcodes.USAGE, f"no job or command named {name!r}{hint}")
