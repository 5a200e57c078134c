"""``manage.py cronjob list|pause|resume|trigger``: an operator's say over the registered jobs."""

from __future__ import annotations

import textwrap
from typing import Any

from django.core.management.base import CommandParser
from django.db import OperationalError, ProgrammingError

from ... import exitcodes
from ...conf import app_settings
from ...db.connections import bound_connect, unavailable
from ...db.execute import database_now
from ...exceptions import DatabaseUnavailable, LockDatabaseError, first_line
from ...run import control
from ...run.jobs import Job, registry
from ...run.runner import RunResult, execute
from ...worker.fleet import live_workers
from ..base import AppCommand, no_job_named
from ..runs import outcome, signals_unwind

#: Each action: its arguments and what it does, shown by ``cronjob ACTION -h`` and in the
#: epilog of ``cronjob -h``.
ACTIONS = {
    "list": ("", "every registered job: schedule, paused or not, pending run-now"),
    "pause": (
        "JOB",
        "record JOB's ticks as skipped_paused instead of running them, in cronworker and "
        "runlocked alike, until resumed (or --until WHEN: a duration such as 30m, 2h, 1d, or "
        "an ISO 8601 date-time)",
    ),
    "resume": ("JOB", "run JOB's ticks again"),
    "trigger": (
        "JOB",
        "ask the running cronworkers to run JOB now: one of them starts it within about a "
        "second, as a manual run (no tick; under the lock, so never beside another run of "
        "JOB; a pause does not hold it back). With no cronworker connected nothing is "
        "recorded (exit 4); --here runs it in this process instead.",
    ),
}


def _actions_text() -> str:
    lines = ["actions:"]
    for action, (arguments, text) in ACTIONS.items():
        head = f"  {action} {arguments}".rstrip().ljust(24)
        wrapped = textwrap.wrap(text, width=70)
        lines.append(head + wrapped[0])
        lines.extend(" " * 24 + line for line in wrapped[1:])
    return "\n".join(lines) + "\n\n"


EPILOG = (
    _actions_text()
    + """\
exit codes:
  0    done (trigger: requested; --here: the job ran, or was skipped as runlocked says)
  1    trigger --here: the job raised (recorded as failed)
  2    usage error: unknown job, bad --until
  4    trigger: no cronworker is connected to the database, nothing was recorded
  69   the lock database cannot be reached
  78   configuration error: the job state table is missing (run migrate), not PostgreSQL,
       or a system check of django-advisory-cron reports an error (one line each, at start;
       manage.py check shows them all; --skip-checks starts anyway)
  75, 130, 143   trigger --here: as for runlocked
"""
)


def _said(action: str) -> str:
    """What ``action`` does, as ``cronjob ACTION -h`` says it (a sentence of its own)."""
    arguments, text = ACTIONS[action]
    return f"{action} {arguments}".rstrip() + f": {text.rstrip('.')}."


class Command(AppCommand):
    epilog = EPILOG
    help = "Pause, resume or run now a registered job, or list the jobs and their state."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        actions.add_parser(
            "list", help="list the registered jobs and their state", description=_said("list")
        )
        pause = actions.add_parser("pause", help="pause a job", description=_said("pause"))
        pause.add_argument("job", metavar="JOB")
        pause.add_argument(
            "--until",
            metavar="WHEN",
            help="end the pause by itself: a duration (90s, 30m, 2h, 1d, 1h30m) or an ISO 8601 "
            "date-time (without an offset, in TIME_ZONE)",
        )
        pause.add_argument("--reason", default="", metavar="TEXT", help="why, for the others")
        resume = actions.add_parser(
            "resume", help="resume a paused job", description=_said("resume")
        )
        resume.add_argument("job", metavar="JOB")
        trigger = actions.add_parser(
            "trigger",
            help="run a job now, in a running cronworker",
            description=_said("trigger"),
        )
        trigger.add_argument("job", metavar="JOB")
        trigger.add_argument(
            "--here",
            action="store_true",
            help="run it in this process instead, as a manual run under its lock",
        )
        parser.add_argument(
            "--database", default=None, metavar="ALIAS", help="the database holding the locks"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        alias = options["database"] or app_settings.lock_database
        job = None if action == "list" else self._find(options["job"])
        try:
            bound_connect(alias)
            if action == "list":
                self._list(alias)
            elif action == "pause":
                assert job is not None
                self._pause(job, alias, options["until"], options["reason"])
            elif action == "resume":
                assert job is not None
                self._resume(job, alias)
            else:
                assert job is not None
                self._trigger(job, alias, options["here"])
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, first_line(error))
        except OperationalError as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(unavailable(alias, error)))
        except LockDatabaseError as error:
            self.leave(exitcodes.CONFIG, str(error))
        except ProgrammingError as error:
            self.leave(
                exitcodes.CONFIG,
                f"{first_line(error)} (is the job state table missing? run manage.py migrate)",
            )

    def _find(self, name: str) -> Job[Any, Any]:
        if name in registry:
            return registry.get(name)
        self.leave(exitcodes.USAGE, no_job_named([name], "see cronjob list"))

    def _list(self, alias: str) -> None:
        jobs = registry.all()
        if not jobs:
            self.stdout.write("No jobs are registered.")
            return
        states = control.states(alias)
        now = database_now(alias)
        width = max(len(job.name) for job in jobs)
        for job in jobs:
            row = states.get(job.name)
            said = []
            if control.is_paused(row, now):
                assert row is not None
                said.append(control.describe_pause(row))
            if row is not None and row.run_requested is not None:
                by = f" by {row.run_requested_by}" if row.run_requested_by else ""
                said.append(f"run requested{by} at {row.run_requested:%Y-%m-%d %H:%M:%S}")
            self.stdout.write(
                f"{job.name:<{width}}  {job.schedule_text or '(no schedule)':<15}  "
                f"{'; '.join(said) or 'active'}"
            )
        workers = len(live_workers(alias))
        self.stdout.write(f"{workers} cronworker(s) connected")

    def _pause(self, job: Job[Any, Any], alias: str, until_text: str | None, reason: str) -> None:
        until = None
        if until_text is not None:
            try:
                until = control.parse_until(until_text, database_now(alias))
            except ValueError as error:
                self.leave(exitcodes.USAGE, f"--until: {error}")
        row = control.pause(
            job.name, until=until, by=control.operator(), reason=reason, using=alias
        )
        self.stdout.write(
            f"{job.name}: {control.describe_pause(row)}. Its ticks are recorded as "
            f"skipped_paused until it ends or 'manage.py cronjob resume {job.name}'."
        )

    def _resume(self, job: Job[Any, Any], alias: str) -> None:
        before = control.resume(job.name, using=alias)
        if before is None or not control.is_paused(before, database_now(alias)):
            self.stdout.write(f"{job.name}: was not paused; nothing to do.")
            return
        self.stdout.write(f"{job.name}: resumed (it was {control.describe_pause(before)}).")

    def _trigger(self, job: Job[Any, Any], alias: str, here: bool) -> None:
        if here:
            ended: RunResult | BaseException
            try:
                with signals_unwind(job.timeout):
                    ended = execute(job, using=alias, manual=True)
            except Exception as error:
                ended = error
            code, message = outcome(job.name, ended, None)
            if code != exitcodes.OK:
                self.leave(code, message)
            self.stdout.write(f"{message} (manual run)")
            return
        workers = len(live_workers(alias))
        if not workers:
            self.leave(
                exitcodes.NO_WORKER,
                f"no cronworker is connected to the database, so nothing would run {job.name}; "
                f"nothing was recorded. Start 'manage.py cronworker', or run it here with "
                f"'manage.py cronjob trigger --here {job.name}'",
            )
        requested = control.request_run(job.name, by=control.operator(), using=alias)
        self.stdout.write(
            f"{job.name}: run requested (pending since {requested:%Y-%m-%d %H:%M:%S %Z}); one "
            f"of the {workers} connected cronworker(s) starts it within about a second. The run "
            "history records it as a manual run."
        )
