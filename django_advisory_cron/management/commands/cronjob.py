"""``manage.py cronjob list|history|crontab|pause|resume|trigger``: an operator's say over the
registered jobs, and what they did."""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser
from django.db import OperationalError, ProgrammingError
from django.utils import timezone

from ... import exitcodes
from ...conf import app_settings
from ...core.schedule import Every
from ...db.connections import bound_connect, unavailable
from ...db.execute import database_now
from ...exceptions import DatabaseUnavailable, LockDatabaseError, first_line
from ...models import JobRun
from ...ops.charts import human_duration
from ...ops.status import JobStatus, job_statuses
from ...run import control
from ...run.jobs import Job, registry
from ...run.runner import RunResult, execute
from ...worker.fleet import live_workers
from ..base import AppCommand, no_job_named
from ..runs import outcome, signals_unwind

#: Each action: its arguments and what it does, shown by ``cronjob ACTION -h`` and in the
#: epilog of ``cronjob -h``.
ACTIONS = {
    "list": (
        "",
        "every registered job: schedule, paused or not, pending run-now, its next tick, its "
        "last run (skips aside) and how that ended, and where its ticks run (its deliver=, "
        "or - for in place)",
    ),
    "history": (
        "JOB",
        "JOB's last runs, newest first (--limit N, default 20): status, host, pid, start, "
        "duration and the first line of the error",
    ),
    "crontab": (
        "",
        "print a crontab line per cron-scheduled job, each running 'runlocked JOB' (with "
        "--enqueue for a deliver= job) from this directory with this python, manage.py and "
        "DJANGO_SETTINGS_MODULE; put the same lines in every replica's crontab. Each job's "
        "lines follow a CRON_TZ= line naming the zone its schedule is read in (its timezone=, "
        "else TIME_ZONE): cron reads a schedule in the host's zone otherwise, and a cron that "
        "ignores CRON_TZ (Debian's, busybox's) needs the host in that zone. runlocked takes "
        "the tick nearest the time it starts within MAX_SKEW, so a line takes the tick it is "
        "called for, and the replicas run each tick once. Interval (every=) and seconds-field "
        "schedules cannot be written for crontab: each gets a comment line (run them with "
        "cronworker)",
    ),
    "pause": (
        "JOB",
        "skip JOB's ticks instead of running them, in cronworker and "
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
  2    usage error: unknown job, bad --until, --limit below 1
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


def _time(value: datetime) -> str:
    """A time as the tables show it: to the second, in ``TIME_ZONE`` (named in the header)."""
    return f"{timezone.localtime(value):%Y-%m-%d %H:%M:%S}"


def _error_line(error: str) -> str:
    """The first line of a run's recorded error: of a traceback, the exception's own line
    (the first line not indented after the last ``Traceback`` header)."""
    lines = error.strip().splitlines()
    headers = [n for n, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    start = headers[-1] + 1 if headers else 0
    return next((line for line in lines[start:] if not line[:1].isspace()), "")


def _run_facts(run: JobRun) -> dict[str, Any]:
    """One run of ``cronjob history --json``."""
    return {
        "id": run.pk,
        "status": run.status,
        "manual": run.manual,
        "tick": None if run.tick is None else run.tick.isoformat(),
        "host": run.host,
        "pid": run.pid,
        "started": run.started.isoformat(),
        "finished": None if run.finished is None else run.finished.isoformat(),
        "duration": run.duration,
        "error": _error_line(run.error),
    }


def _runlocked_command() -> str:
    """``cd DIR && DJANGO_SETTINGS_MODULE=... PYTHON MANAGE runlocked``, as this command was
    started (``python -m django`` when it was not started from a manage.py)."""
    started = sys.argv[0]
    if started.endswith(".py") and os.path.basename(started) != "__main__.py":
        manage = shlex.quote(os.path.abspath(started))
    else:
        manage = "-m django"
    module = os.environ.get("DJANGO_SETTINGS_MODULE")
    environment = f"DJANGO_SETTINGS_MODULE={shlex.quote(module)} " if module else ""
    return (
        f"cd {shlex.quote(os.getcwd())} && {environment}{shlex.quote(sys.executable)} "
        f"{manage} runlocked"
    )


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Pause, resume or run now a registered job; list the jobs and their state, show a "
        "job's runs, or print crontab lines that run the scheduled jobs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        listing = actions.add_parser(
            "list", help="list the registered jobs and their state", description=_said("list")
        )
        listing.add_argument("--json", action="store_true", help="print one JSON document")
        history = actions.add_parser(
            "history", help="show a job's last runs", description=_said("history")
        )
        history.add_argument("job", metavar="JOB")
        history.add_argument(
            "--limit", type=int, default=20, metavar="N", help="how many runs (default 20)"
        )
        history.add_argument("--json", action="store_true", help="print one JSON document")
        actions.add_parser(
            "crontab",
            help="print crontab lines that run the scheduled jobs",
            description=_said("crontab"),
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
        if action == "crontab":
            self._crontab()
            return
        alias = options["database"] or app_settings.lock_database
        job = None if action == "list" else self._find(options["job"])
        if action == "history" and options["limit"] < 1:
            self.leave(exitcodes.USAGE, f"--limit must be at least 1, not {options['limit']}")
        try:
            bound_connect(alias)
            if action == "list":
                self._list(alias, options["json"])
            elif action == "history":
                assert job is not None
                self._history(job, alias, options["limit"], options["json"])
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

    def _list(self, alias: str, as_json: bool) -> None:
        """The jobs' states, next ticks and last runs, from the query the Jobs page and
        ``cronstatus`` make."""
        statuses = job_statuses(now=database_now(alias), using=alias)
        workers = len(live_workers(alias))
        if as_json:
            jobs = [{**status.as_dict(), "deliver": status.job.deliver} for status in statuses]
            self.stdout.write(json.dumps({"jobs": jobs, "cronworkers": workers}, indent=2))
            return
        if not statuses:
            self.stdout.write("No jobs are registered.")
            return
        zone = timezone.get_current_timezone_name()
        header = ["JOB", "SCHEDULE", f"NEXT TICK ({zone})", "LAST RUN", "DELIVER", "STATE"]
        self._table([header, *(self._listed(status) for status in statuses)])
        self.stdout.write(f"{workers} cronworker(s) connected")

    @staticmethod
    def _listed(status: JobStatus) -> list[str]:
        """One row of ``cronjob list``."""
        said = [status.paused] if status.paused else []
        requested = status.run_requested
        if requested is not None:
            by = status.state.run_requested_by if status.state is not None else ""
            said.append(f"run requested{f' by {by}' if by else ''} at {_time(requested)}")
        last = status.last_run
        return [
            status.name,
            status.job.schedule_text or "(no schedule)",
            "-" if status.next_tick is None else _time(status.next_tick),
            "never ran" if last is None else f"{last.status} {_time(last.started)}",
            status.job.deliver or "-",
            "; ".join(said) or "active",
        ]

    def _history(self, job: Job[Any, Any], alias: str, limit: int, as_json: bool) -> None:
        """``job``'s last ``limit`` runs, newest first (skips included)."""
        runs = list(JobRun.objects.using(alias).filter(job=job.name)[:limit])
        if as_json:
            self.stdout.write(json.dumps([_run_facts(run) for run in runs], indent=2))
            return
        if not runs:
            self.stdout.write(f"{job.name}: no runs recorded")
            return
        zone = timezone.get_current_timezone_name()
        header = ["RUN", f"STARTED ({zone})", "DURATION", "STATUS", "HOST", "PID", "ERROR"]
        self._table(
            [
                header,
                *(
                    [
                        str(run.pk),
                        _time(run.started),
                        "-" if run.duration is None else human_duration(run.duration),
                        run.status + (" (manual)" if run.manual else ""),
                        run.host,
                        str(run.pid),
                        _error_line(run.error),
                    ]
                    for run in runs
                ),
            ]
        )

    def _crontab(self) -> None:
        """A crontab line per cron-scheduled job (a comment for the others), after the
        ``CRON_TZ=`` of its zone."""
        command = _runlocked_command()
        self.stdout.write(
            "# django-advisory-cron: the same lines in every replica's crontab "
            "(manage.py cronjob crontab)"
        )
        self.stdout.write(
            f"# runlocked takes the tick nearest its start within MAX_SKEW "
            f"({app_settings.MAX_SKEW:g}s): each line takes the tick it is called for"
        )
        zone = None
        for job in registry.all():
            schedule = job.schedule
            if schedule is None:
                continue
            if isinstance(schedule, Every) or schedule.has_seconds:
                kind = "an interval (every=)" if isinstance(schedule, Every) else "a seconds field"
                self.stdout.write(
                    f"# {job.name}: {job.schedule_text!r} is {kind}, which crontab cannot "
                    "express: run it with manage.py cronworker"
                )
                continue
            if schedule.zone_name != zone:
                zone = schedule.zone_name
                self.stdout.write(f"CRON_TZ={zone}")
            enqueue = "--enqueue " if job.deliver else ""
            line = f"{command} {enqueue}{shlex.quote(job.name)}"
            self.stdout.write(f"{schedule.expression} {line.replace('%', chr(92) + '%')}")

    def _table(self, rows: list[list[str]]) -> None:
        """Print ``rows`` as columns two spaces apart, the last one as it is."""
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            self.stdout.write("  ".join([*cells, row[-1]]).rstrip())

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
            f"{job.name}: {control.describe_pause(row)}. Its ticks are skipped until it "
            f"ends or 'manage.py cronjob resume {job.name}'."
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
