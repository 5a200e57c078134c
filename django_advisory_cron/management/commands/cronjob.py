"""``manage.py cronjob list|history|crontab|pause|resume|trigger|add|edit|reset|remove``: an
operator's say over the jobs (defined in code, in settings or in the database), their schedules,
and what they did."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn, TypeVar

from django.core.management.base import CommandParser
from django.db import DataError, IntegrityError, OperationalError, ProgrammingError
from django.utils import timezone

from ... import exitcodes
from ...conf import app_settings
from ...core.schedule import Every
from ...db.connections import bound_connect, unavailable
from ...db.execute import database_now
from ...exceptions import DatabaseUnavailable, LockDatabaseError, first_line
from ...models import JobRun, Schedule
from ...ops.charts import human_duration
from ...ops.status import JobStatus, job_statuses
from ...run import control
from ...run.catalog import Catalog
from ...run.declared import aware
from ...run.definitions import OVERRIDABLE, Definition, overridden, to_job
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
        "last run (skips aside) and how that ended, where its ticks run (its deliver=, "
        "or - for in place), and where it is defined (SOURCE: code, settings for "
        "ADVISORY_CRON['SCHEDULES'], or database; 'code, overridden: schedule' when an "
        "override in the database changes it). A database schedule that cannot run is named "
        "after the table, with why",
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
    "add": (
        "NAME",
        "add a schedule kept in the database, named NAME (its runs, lock and ticks go by it): "
        "it calls a registered job (--job, with --args and --kwargs as JSON) or a management "
        "command (--command, with --args), on a cron --schedule (read in --timezone, else "
        "TIME_ZONE) or --every N seconds. Running cronworkers follow at once; cron can call "
        "'runlocked NAME'",
    ),
    "edit": (
        "NAME",
        "change the database schedule NAME: only the options given change (those of add; "
        "--enable or --disable; an empty value clears an option). For a job defined in code "
        "or in ADVISORY_CRON['SCHEDULES'], change its --schedule, --every or --timezone, or "
        "--enable/--disable it: an override kept in the database, until reset",
    ),
    "reset": (
        "NAME",
        "drop the override of job NAME: its schedule is the one in code (or settings) again",
    ),
    "remove": (
        "NAME",
        "delete the database schedule NAME (its run history stays). A job defined in code or "
        "settings is removed there; reset drops its override",
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
  0    done (trigger: requested; --here: the job ran, or was skipped as runlocked says;
       reset: also when there was no override)
  1    trigger --here: the job raised (recorded as failed)
  2    usage error: unknown job, bad --until, --limit below 1; add, edit: a schedule that
       cannot run (one line saying why: unknown job or command, arguments it does not take,
       a bad cron expression or zone, a name taken, ...), nothing was written; remove, reset:
       a job defined in code or settings, or a database schedule with nothing to reset
  4    trigger: no cronworker is connected to the database, nothing was recorded
  69   the lock database cannot be reached
  78   configuration error: the job state or schedule table is missing (run migrate), not
       PostgreSQL, or a system check of django-advisory-cron reports an error (one line
       each, at start; manage.py check shows them all; --skip-checks starts anyway)
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


#: The options of ``add`` and ``edit``: each one's flag, the definition field it sets (its
#: ``dest`` is ``set_FIELD``: Django takes ``args`` for itself), and its metavar and help.
SCHEDULE_OPTIONS = (
    ("--job", "job", "JOB", "the registered job it calls"),
    ("--command", "command", "COMMAND", "the management command it calls"),
    (
        "--args",
        "args",
        "JSON",
        "the arguments, a JSON list: '[\"daily\", 2]' (for a command: its command-line "
        'arguments, \'["--days", "30"]\')',
    ),
    ("--kwargs", "kwargs", "JSON", "the keyword arguments (a command's options), a JSON object"),
    ("--schedule", "cron", "CRON", "a five- or six-field cron expression: '0 2 * * *'"),
    ("--timezone", "timezone", "ZONE", "the zone the cron expression is read in (else TIME_ZONE)"),
    ("--every", "every", "SECONDS", "an interval instead of a cron expression, in seconds"),
    ("--catch-up", "catch_up", "POLICY", "which missed ticks run: latest, all or none"),
    ("--max-lateness", "max_lateness", "SECONDS", "a tick later than this is skipped"),
    ("--timeout", "timeout", "SECONDS", "stop a run that takes longer"),
    ("--deliver", "deliver", "BACKEND", "hand its ticks to a Tasks backend (deliver=)"),
    ("--description", "description", "TEXT", "what it is for, for the others"),
    (
        "--starts",
        "starts",
        "WHEN",
        "its first possible tick, ISO 8601 (in TIME_ZONE without offset)",
    ),
    ("--ends", "ends", "WHEN", "its last possible tick, ISO 8601"),
)
T = TypeVar("T")
#: The flag of each field, for messages.
FLAGS = {field: flag for flag, field, _metavar, _help in SCHEDULE_OPTIONS}
_SECONDS = ("every", "max_lateness", "timeout")
_JSON = {
    "args": "a JSON list such as '[\"daily\", 2]'",
    "kwargs": 'a JSON object such as \'{"note": "x"}\'',
}
_TIMES = ("starts", "ends")
#: What an override can change, as ``cronjob list`` says it.
_OVERRIDE_WORDS = {"cron": "schedule", "every": "schedule", "timezone": "schedule"}


class ActionParser(CommandParser):
    """An action's parser: a usage error is one line, as the command's other errors are."""

    def error(self, message: str) -> NoReturn:
        if not self.called_from_command_line:
            super().error(message)
        action = self.prog.rpartition(" ")[2]
        sys.stderr.write(f"cronjob: {action}: {message} (see manage.py cronjob {action} -h)\n")
        sys.exit(exitcodes.USAGE)


def _where(job: Job[Any, Any]) -> str:
    """Where a job that is not a database schedule is defined, for people."""
    return "ADVISORY_CRON['SCHEDULES']" if job.source == "settings" else "code"


def _described(job: Job[Any, Any]) -> str:
    """A job's schedule in a few words: ``0 2 * * * in Europe/Paris, disabled``."""
    text = job.schedule_text or "no schedule"
    if job.timezone:
        text += f" in {job.timezone}"
    return text if job.enabled else f"{text}, disabled"


def _row(definition: Definition) -> dict[str, Any]:
    """The columns of a schedule's row (``changed`` is the database's to set)."""
    values = dataclasses.asdict(definition)
    del values["changed"]
    return values


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Pause, resume or run now a job; add, edit or remove a schedule kept in the database "
        "(or override a code job's); list the jobs and their state, show a job's runs, or "
        "print crontab lines that run the scheduled jobs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(
            dest="action", metavar="ACTION", required=True, parser_class=ActionParser
        )
        listing = actions.add_parser(
            "list", help="list the jobs and their state", description=_said("list")
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
        add = actions.add_parser(
            "add", help="add a schedule kept in the database", description=_said("add")
        )
        edit = actions.add_parser(
            "edit", help="change a schedule, or override a code job's", description=_said("edit")
        )
        for action in (add, edit):
            action.add_argument("job", metavar="NAME")
            for flag, field, metavar, text in SCHEDULE_OPTIONS:
                action.add_argument(flag, dest=f"set_{field}", metavar=metavar, help=text)
        add.add_argument(
            "--disabled",
            dest="enabled",
            action="store_false",
            help="add it without ticks, until 'cronjob edit NAME --enable'",
        )
        enabling = edit.add_mutually_exclusive_group()
        enabling.add_argument(
            "--enable", dest="enabled", action="store_const", const=True, help="give it ticks"
        )
        enabling.add_argument(
            "--disable",
            dest="enabled",
            action="store_const",
            const=False,
            help="take its ticks away (it still runs when asked to run now)",
        )
        actions.add_parser(
            "reset", help="drop a code job's override", description=_said("reset")
        ).add_argument("job", metavar="NAME")
        actions.add_parser(
            "remove", help="delete a schedule kept in the database", description=_said("remove")
        ).add_argument("job", metavar="NAME")
        parser.add_argument(
            "--database", default=None, metavar="ALIAS", help="the database holding the locks"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "crontab":
            self._crontab()
            return
        alias = options["database"] or app_settings.lock_database
        if action == "history" and options["limit"] < 1:
            self.leave(exitcodes.USAGE, f"--limit must be at least 1, not {options['limit']}")
        try:
            found = self.catalog(alias)
            bound_connect(alias)
            if action == "list":
                self._list(found, alias, options["json"])
            elif action in ("add", "edit", "reset", "remove"):
                self._change(action, found, alias, options)
            elif action == "history":
                job = self._find(found, options["job"])
                self._history(job, alias, options["limit"], options["json"])
            elif action == "pause":
                job = self._find(found, options["job"])
                self._pause(job, alias, options["until"], options["reason"])
            elif action == "resume":
                self._resume(self._find(found, options["job"]), alias)
            else:
                self._trigger(self._find(found, options["job"]), alias, options["here"])
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

    def _find(self, found: Catalog, name: str) -> Job[Any, Any]:
        if name in found:
            return found.get(name)
        if name in found.broken:
            self.leave(
                exitcodes.USAGE,
                f"the schedule {name!r} cannot run: {found.broken[name]}; change it with "
                f"'manage.py cronjob edit {name}', or remove it",
            )
        self.leave(exitcodes.USAGE, no_job_named([name], "see cronjob list", known=found.jobs))

    def _list(self, found: Catalog, alias: str, as_json: bool) -> None:
        """The jobs' states, next ticks and last runs, from the query the Jobs page and
        ``cronstatus`` make; then the database schedules that cannot run."""
        statuses = job_statuses(now=database_now(alias), using=alias)
        workers = len(live_workers(alias))
        if as_json:
            jobs = [
                {
                    **status.as_dict(),
                    "deliver": status.job.deliver,
                    "source": status.job.source,
                    "overridden": list(status.job.overridden),
                    "enabled": status.job.enabled,
                }
                for status in statuses
            ]
            document = {"jobs": jobs, "cronworkers": workers, "cannot_run": found.broken}
            self.stdout.write(json.dumps(document, indent=2))
            return
        if statuses:
            zone = timezone.get_current_timezone_name()
            header = [
                "JOB",
                "SOURCE",
                "SCHEDULE",
                f"NEXT TICK ({zone})",
                "LAST RUN",
                "DELIVER",
                "STATE",
            ]
            self._table([header, *(self._listed(status, found) for status in statuses)])
        else:
            self.stdout.write("No jobs are registered.")
        for name, why in sorted(found.broken.items()):
            self.stdout.write(
                f"{name}: a database schedule that cannot run: {why} (manage.py cronjob edit "
                f"{name}, or remove it)"
            )
        if statuses:
            self.stdout.write(f"{workers} cronworker(s) connected")

    @staticmethod
    def _listed(status: JobStatus, found: Catalog) -> list[str]:
        """One row of ``cronjob list``."""
        job = status.job
        said = [] if job.enabled else ["disabled"]
        if status.paused:
            said.append(status.paused)
        requested = status.run_requested
        if requested is not None:
            by = status.state.run_requested_by if status.state is not None else ""
            said.append(f"run requested{f' by {by}' if by else ''} at {_time(requested)}")
        last = status.last_run
        return [
            status.name,
            Command._source(job, found),
            job.schedule_text or "(no schedule)",
            "-" if status.next_tick is None else _time(status.next_tick),
            "never ran" if last is None else f"{last.status} {_time(last.started)}",
            job.deliver or "-",
            "; ".join(said) or "active",
        ]

    @staticmethod
    def _source(job: Job[Any, Any], found: Catalog) -> str:
        """Where a job is defined, and what an override in the database changes of it."""
        override = found.definition(job.name)
        if job.source == "database" or override is None:
            return job.source
        words = dict.fromkeys(
            _OVERRIDE_WORDS.get(field, "enabled" if job.enabled else "disabled")
            for field in job.overridden
        )
        return f"{job.source}, overridden: {', '.join(words) or 'nothing'}"

    def _change(self, action: str, found: Catalog, alias: str, options: dict[str, Any]) -> None:
        """``add``, ``edit``, ``reset`` or ``remove`` the schedule named ``options["job"]``,
        written with the ORM (the table's trigger tells the workers) in the operator's name."""
        name = options["job"]
        row = found.definition(name)  # kept in the database: a schedule, or an override
        job = found.jobs.get(name)
        if action == "add":
            self._add(found, alias, name, row, options)
        elif row is None and job is None:
            self.leave(exitcodes.USAGE, no_job_named([name], "see cronjob list", known=found.jobs))
        elif action == "edit" and row is not None and not row.override:
            self._edit(found, alias, row, options)
        elif action == "edit":
            self._override(alias, name, row, options)
        elif action == "reset":
            self._reset(alias, name, row, job)
        else:
            self._remove(alias, name, row, job)

    def _refuse(self, action: str, name: str, why: str) -> NoReturn:
        self.leave(exitcodes.USAGE, f"cannot {action} {name!r}: {why}")

    def _given(self, action: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
        """The fields the options given set, in the definition's types."""
        given: dict[str, Any] = {}
        for field, flag in FLAGS.items():
            text = options[f"set_{field}"]
            if text is None:
                continue
            if field in _JSON:
                try:
                    given[field] = json.loads(text)
                except ValueError as error:
                    self._refuse(action, name, f"{flag} is not JSON ({error}); give {_JSON[field]}")
            elif field in _SECONDS:
                try:
                    given[field] = float(text) if text.strip() else None
                except ValueError:
                    self._refuse(action, name, f"{flag} must be a number of seconds, not {text!r}")
            elif field in _TIMES:
                try:
                    given[field] = aware(text, flag) if text.strip() else None
                except ValueError as error:
                    self._refuse(action, name, str(error))
            else:
                given[field] = text
        if options["enabled"] is not None:
            given["enabled"] = options["enabled"]
        if not given:
            self._refuse(action, name, f"nothing to change; see manage.py cronjob {action} -h")
        return given

    def _check(self, action: str, definition: Definition, known: list[Job[Any, Any]]) -> None:
        """Leave with the definition's problems (all of them, on one line), if any."""
        problems = definition.problems(known=known)
        if problems:
            self._refuse(action, definition.name, "; ".join(problems))

    def _saved(self, action: str, name: str, write: Callable[[], T]) -> T:
        """``write()``; a row the database refuses (a schedule of the same name added
        meanwhile) is a usage error too."""
        try:
            return write()
        except (IntegrityError, DataError) as error:
            self._refuse(action, name, f"the database refused it: {first_line(error)}")

    def _add(
        self,
        found: Catalog,
        alias: str,
        name: str,
        row: Definition | None,
        options: dict[str, Any],
    ) -> None:
        if row is not None and not row.override:
            self._refuse(
                "add",
                name,
                f"a schedule of that name is kept in the database; change it with "
                f"'manage.py cronjob edit {name}'",
            )
        definition = Definition.from_values({"name": name, **self._given("add", name, options)})
        self._check("add", definition, found.all())
        self._saved(
            "add",
            name,
            lambda: Schedule.objects.using(alias).create(
                **_row(definition), changed_by=control.operator()
            ),
        )
        self.stdout.write(
            f"{name}: added, calling {definition.calls}, {_described(to_job(definition))}. "
            f"Running cronworkers follow at once; cron can call 'manage.py runlocked {name}'."
        )

    def _edit(self, found: Catalog, alias: str, row: Definition, options: dict[str, Any]) -> None:
        """Change what the options given say of a database schedule."""
        name = row.name
        given = self._given("edit", name, options)
        changes = dict(given)
        if "cron" in given and "every" not in given:
            changes["every"] = None
        if "every" in given and "cron" not in given:
            changes["cron"] = ""
            changes.setdefault("timezone", "")
        if "job" in given and "command" not in given:
            changes["command"] = ""
        if "command" in given and "job" not in given:
            changes["job"] = ""
        definition = dataclasses.replace(row, **changes)
        self._check("edit", definition, [job for job in found.all() if job.name != name])
        updated = self._saved(
            "edit",
            name,
            lambda: (
                Schedule.objects.using(alias)
                .filter(name=name, override=False)
                .update(**_row(definition), changed_by=control.operator())
            ),
        )
        if not updated:
            self._refuse("edit", name, "it was removed meanwhile")
        self.stdout.write(
            f"{name}: changed ({', '.join(self._flags(given))}); it calls {definition.calls}, "
            f"{_described(to_job(definition))}."
        )

    @staticmethod
    def _flags(given: dict[str, Any]) -> list[str]:
        """The options given, as typed."""
        enabled = {True: "--enable", False: "--disable"}
        return [
            enabled[value] if field == "enabled" else FLAGS[field] for field, value in given.items()
        ]

    def _override(
        self, alias: str, name: str, row: Definition | None, options: dict[str, Any]
    ) -> None:
        """Change the schedule of a job defined in code or settings: its override row."""
        given = self._given("edit", name, options)
        if name not in registry:
            self._refuse(
                "edit",
                name,
                f"it overrides a job no longer defined in code; 'manage.py cronjob reset {name}' "
                "drops the override",
            )
        code = registry.get(name)
        others = [FLAGS[field] for field in given if field not in OVERRIDABLE]
        if others:
            self._refuse(
                "edit",
                name,
                f"it is defined in {_where(code)}: change {', '.join(others)} there; edit "
                "changes only its --schedule, --every or --timezone, and --enable/--disable",
            )
        base = row or Definition(name=name, override=True)
        changes = dict(given)
        if "cron" in given and "every" not in given:
            changes["every"] = None
            if "timezone" not in given and not base.cron and code.cron:
                # A new cron expression is read where the code's was.
                changes["timezone"] = code.timezone or ""
        if "every" in given and "cron" not in given:
            changes["cron"] = ""
            changes.setdefault("timezone", "")
        schedule_given = bool({"cron", "every"} & set(given))
        if "timezone" in given and not schedule_given and not base.cron and base.every is None:
            changes["cron"] = code.cron or ""
        definition = dataclasses.replace(base, **changes)
        self._check("edit", definition, [])
        self._saved(
            "edit",
            name,
            lambda: Schedule.objects.using(alias).update_or_create(
                name=name, defaults={**_row(definition), "changed_by": control.operator()}
            ),
        )
        self.stdout.write(
            f"{name}: overridden in the database: {_described(overridden(code, definition))} "
            f"(in {_where(code)}: {_described(code)}); 'manage.py cronjob reset {name}' goes "
            "back to that."
        )

    def _reset(
        self, alias: str, name: str, row: Definition | None, job: Job[Any, Any] | None
    ) -> None:
        if row is not None and not row.override:
            self._refuse(
                "reset",
                name,
                "it is a schedule kept in the database, with no code to go back to; change "
                f"it with 'manage.py cronjob edit {name}', or remove it",
            )
        if row is None:
            assert job is not None
            self.stdout.write(
                f"{name}: has no override; nothing to do (it runs {_described(job)}, as in "
                f"{_where(job)})."
            )
            return
        Schedule.objects.using(alias).filter(name=name, override=True).delete()
        if name not in registry:
            self.stdout.write(f"{name}: override removed (no job {name!r} is defined in code).")
            return
        code = registry.get(name)
        self.stdout.write(
            f"{name}: override removed; back to its schedule in {_where(code)}: {_described(code)}."
        )

    def _remove(
        self, alias: str, name: str, row: Definition | None, job: Job[Any, Any] | None
    ) -> None:
        if row is None or row.override:
            where = "code" if job is None else _where(job)
            hint = (
                f"'manage.py cronjob reset {name}' drops its override"
                if row is not None
                else f"'manage.py cronjob edit {name} --disable' takes its ticks away"
            )
            self._refuse("remove", name, f"it is defined in {where}, and removed there; {hint}")
        Schedule.objects.using(alias).filter(name=name, override=False).delete()
        self.stdout.write(f"{name}: removed (it called {row.calls}); its run history is kept.")

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
