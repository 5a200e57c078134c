"""``manage.py cronjob ACTION`` (``list``, ``history``, ``next``, ``crontab``, ``pause``,
``resume``, ``trigger``, ``backfill``, ``add``, ``edit``, ``reset``, ``remove``, ``versions``,
``revert``, ``import``): an
operator's say over the jobs (defined in code, in settings or in the database), their
schedules, and what they did. The command wires the actions' arguments and help; what they
print and write is in [listing][django_advisory_cron.management.listing],
[crontab][django_advisory_cron.management.crontab],
[job_actions][django_advisory_cron.management.job_actions],
[backfill][django_advisory_cron.management.backfill],
[schedule_changes][django_advisory_cron.management.schedule_changes] and
[importers][django_advisory_cron.management.importers]; its help texts are in
[cronjob_help][django_advisory_cron.management.cronjob_help]."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import OperationalError, ProgrammingError

from ... import exitcodes
from ...conf import app_settings
from ...db.connections import bound_connect, unavailable
from ...delivery import targets
from ...exceptions import DatabaseUnavailable, LockDatabaseError, first_line
from ...jobs import versions
from ...jobs.catalog import Catalog
from ...jobs.job import Job
from ...ops import upcoming
from ...ops.control import operator
from ...run.runner import RunResult
from .. import backfill, importers, job_actions, listing, schedule_changes
from ..arguments import LIMIT, VERSION, Count
from ..arguments import text as utf8_text
from ..base import AppCommand, UsageParser, cannot_run, no_job_named
from ..cronjob_help import EPILOG, add_action
from ..crontab import crontab_lines
from ..runs import outcome
from ..schedule_options import SCHEDULE_OPTIONS, Refused

#: How many ticks ``cronjob next`` may list.
TICKS = Count(1, upcoming.MOST)


class Command(AppCommand):
    epilog = EPILOG
    #: Shown by 'manage.py help', which every command shares: ``cronjob -h`` fits a screen.
    suppressed_base_arguments = {
        "--version",
        "--verbosity",
        "--settings",
        "--pythonpath",
        "--traceback",
        "--no-color",
        "--force-color",
    }
    help = "Pause, resume or run a job now; change the schedules; read the jobs and their runs."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(
            dest="action", metavar="ACTION", required=True, parser_class=UsageParser
        )
        jobs = add_action(actions, "list")
        jobs.add_argument("--json", action="store_true", help="print one JSON document")
        history = add_action(actions, "history")
        history.add_argument("job", type=utf8_text, metavar="JOB")
        history.add_argument(
            "--limit",
            type=LIMIT,
            default=20,
            metavar="N",
            help=f"how many runs ({LIMIT.bounds}; default: %(default)s)",
        )
        history.add_argument("--json", action="store_true", help="print one JSON document")
        history.add_argument(
            "--output", action="store_true", help="print each run's captured output under it"
        )
        ahead = add_action(actions, "next")
        ahead.add_argument("job", type=utf8_text, metavar="JOB")
        ahead.add_argument(
            "-n",
            dest="count",
            type=TICKS,
            default=10,
            metavar="N",
            help=f"how many ticks ({TICKS.bounds}; default: %(default)s)",
        )
        ahead.add_argument("--json", action="store_true", help="print one JSON document")
        add_action(actions, "crontab")
        pause = add_action(actions, "pause")
        pause.add_argument("job", type=utf8_text, metavar="JOB")
        pause.add_argument(
            "--until",
            metavar="WHEN",
            help="end the pause by itself: a duration (90s, 30m, 2h, 1d, 1h30m) or an ISO 8601 "
            "date-time (without an offset, in TIME_ZONE)",
        )
        pause.add_argument(
            "--reason", type=utf8_text, default="", metavar="TEXT", help="why, for the others"
        )
        resume = add_action(actions, "resume")
        resume.add_argument("job", type=utf8_text, metavar="JOB")
        trigger = add_action(actions, "trigger")
        trigger.add_argument("job", type=utf8_text, metavar="JOB")
        trigger.add_argument(
            "--here",
            action="store_true",
            help="run it in this process instead, as a manual run under its lock",
        )
        for tenanted in (pause, resume, trigger):
            tenanted.add_argument(
                "--tenant",
                type=utf8_text,
                default=None,
                metavar="SCHEMA",
                help="a per-tenant job's runs for this tenant schema only (django-tenants)",
            )
        backfilled = add_action(actions, "backfill")
        backfilled.add_argument("job", type=utf8_text, metavar="JOB")
        backfilled.add_argument(
            "--start",
            type=utf8_text,
            required=True,
            metavar="WHEN",
            help="the range's first moment: an ISO 8601 date-time or a duration back from now",
        )
        backfilled.add_argument(
            "--end",
            type=utf8_text,
            default=None,
            metavar="WHEN",
            help="its last moment, as --start (default: now)",
        )
        backfilled.add_argument(
            "--dry-run", action="store_true", help="list the ticks it would run; run nothing"
        )
        add = add_action(actions, "add")
        edit = add_action(actions, "edit")
        for action in (add, edit):
            action.add_argument("job", type=utf8_text, metavar="NAME")
            for flag, field, metavar, said in SCHEDULE_OPTIONS:
                action.add_argument(
                    flag, dest=f"set_{field}", type=utf8_text, metavar=metavar, help=said
                )
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
        add_action(actions, "reset").add_argument("job", type=utf8_text, metavar="NAME")
        add_action(actions, "remove").add_argument("job", type=utf8_text, metavar="NAME")
        kept = add_action(actions, "versions")
        kept.add_argument("job", type=utf8_text, metavar="NAME")
        kept.add_argument("--json", action="store_true", help="print one JSON document")
        reverted = add_action(actions, "revert")
        reverted.add_argument("job", type=utf8_text, metavar="NAME")
        reverted.add_argument("version", type=VERSION, metavar="VERSION")
        imported = add_action(actions, "import")
        imported.add_argument(
            "--from",
            dest="source",
            required=True,
            choices=list(importers.SOURCES),
            metavar="SOURCE",
            help=f"where they are: {', '.join(importers.SOURCES)}",
        )
        imported.add_argument(
            "--deliver",
            default="",
            choices=[target.scheme for target in targets.registered() if target.by_name],
            help="send each entry's Celery task to Celery at its ticks (on the entry's queue), "
            "instead of calling a job here: celery beat retired, its tasks and workers kept",
        )
        imported.add_argument(
            "--dry-run", action="store_true", help="print what it would do; write nothing"
        )
        for action in (
            add,
            edit,
            actions.choices["reset"],
            actions.choices["remove"],
            reverted,
            imported,
        ):
            action.add_argument(
                "--note",
                type=utf8_text,
                default="",
                metavar="TEXT",
                help="why, kept with the version this change makes (see cronjob versions)",
            )
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="the lock database (default: LOCK_DATABASE)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "crontab":
            self._write(crontab_lines())
            return
        alias = options["database"] or app_settings.lock_database
        try:
            found = self.catalog(alias)
            bound_connect(alias)
            if action == "list":
                self._write(listing.job_list(found, alias, options["json"]))
            elif action in ("add", "edit", "reset", "remove"):
                self._change(action, found, alias, options)
            elif action == "import":
                self._import(found, alias, options)
            elif action == "versions":
                self._write(listing.versions(alias, options["job"], options["json"]))
            elif action == "revert":
                self.stdout.write(
                    versions.revert(
                        alias, options["job"], options["version"], operator(), options["note"]
                    )
                )
            elif action == "history":
                job = self._find(found, options["job"])
                self._write(
                    listing.history(
                        job, alias, options["limit"], options["json"], options["output"]
                    )
                )
            elif action == "next":
                job = self._find(found, options["job"])
                self._write(listing.next_ticks(job, alias, options["count"], options["json"]))
            elif action == "pause":
                job = job_actions.for_tenant(self._find(found, options["job"]), options["tenant"])
                self.stdout.write(
                    job_actions.pause(job, alias, options["until"], options["reason"])
                )
            elif action == "resume":
                job = job_actions.for_tenant(self._find(found, options["job"]), options["tenant"])
                self.stdout.write(job_actions.resume(job, alias))
            elif action == "backfill":
                self._backfill(self._find(found, options["job"]), alias, options)
            else:
                job = job_actions.for_tenant(self._find(found, options["job"]), options["tenant"])
                self.stdout.write(job_actions.trigger(job, alias, options["here"]))
        except CommandError as error:
            self.leave(error.returncode, str(error))
        except versions.VersionRefused as error:
            self.leave(exitcodes.USAGE, f"{action} {options['job']}: {error}")
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

    def _import(self, found: Catalog, alias: str, options: dict[str, Any]) -> None:
        """Import the entries of ``--from``; exit 2 when some could not be."""
        source = options["source"]
        try:
            lines, left = importers.run(
                found, alias, source, options["dry_run"], options["deliver"], options["note"]
            )
        except importers.Unavailable as error:
            self.leave(exitcodes.USAGE, f"import --from {source}: {error}")
        self._write(lines)
        if left:
            sys.exit(exitcodes.USAGE)

    def _backfill(self, job: Job[Any, Any], alias: str, options: dict[str, Any]) -> None:
        """Run the range's ticks that have no run, a line each as it ends; exit as the
        action's help says."""
        now = backfill.now_of(alias)
        start = backfill.moment("--start", options["start"], now)
        end = now if options["end"] is None else backfill.moment("--end", options["end"], now)
        end = min(end, now)  # a tick to come is the workers'
        found = backfill.plan(job, alias, start, end)
        pending = found.pending
        self.stdout.write(
            f"{job.name}: {len(found.ticks)} ticks from {start.isoformat()} to "
            f"{end.isoformat()}, {len(pending)} without a run"
            + (f", {len(found.off_calendar)} off its calendar" if found.off_calendar else "")
            + (" (dry run: nothing runs)" if options["dry_run"] else "")
        )
        if options["dry_run"]:
            self._write([f"  would run tick {tick.isoformat()}" for tick in pending])
            self._write(
                [f"  skips tick {t.isoformat()}: {why}" for t, why in found.off_calendar.items()]
            )
            return
        worst = exitcodes.OK

        def report(place: int, tick: datetime, result: RunResult) -> None:
            nonlocal worst
            code, said = outcome(job.name, result, None)
            progress = backfill.bar(place, len(pending))
            self.stdout.write(f"{progress} tick {tick.isoformat()}: {said}")
            if code in (exitcodes.SIGINT, exitcodes.SIGTERM):
                self.leave(code, f"{job.name}: backfill stopped at tick {tick.isoformat()}")
            if worst == exitcodes.OK:
                worst = code

        ended = backfill.run(job, alias, pending, report)
        ran = sum(result.ran for result in ended)
        self.stdout.write(
            f"{job.name}: backfill done: {ran} ran here, {len(ended) - ran} had run elsewhere "
            "or were skipped"
        )
        if worst != exitcodes.OK:
            sys.exit(worst)

    def _write(self, lines: list[str]) -> None:
        """Print each line of a table or listing."""
        for line in lines:
            self.stdout.write(line)

    def _find(self, found: Catalog, name: str) -> Job[Any, Any]:
        if name in found:
            return found.get(name)
        if name in found.broken:
            self.leave(exitcodes.USAGE, cannot_run(name, found.broken[name]))
        self.leave(exitcodes.USAGE, no_job_named([name], "see cronjob list", known=found.jobs))

    def _change(self, action: str, found: Catalog, alias: str, options: dict[str, Any]) -> None:
        """``add``, ``edit``, ``reset`` or ``remove`` the schedule named ``options["job"]``, in
        the operator's name and with ``--note`` (its version says both); what cannot be
        written is a usage error, saying why."""
        name = options["job"]
        try:
            with versions.changing(alias, operator(), options["note"]):
                said = self._changed(action, found, alias, options)
        except Refused as error:
            self.leave(exitcodes.USAGE, f"cannot {action} {name!r}: {error}")
        self.stdout.write(said)

    def _changed(self, action: str, found: Catalog, alias: str, options: dict[str, Any]) -> str:
        name = options["job"]
        kept = found.definition(name)  # kept in the database: a schedule, or an override
        job = found.jobs.get(name)
        if action == "add":
            return schedule_changes.add(found, alias, name, options)
        if kept is None and job is None:
            self.leave(exitcodes.USAGE, no_job_named([name], "see cronjob list", known=found.jobs))
        if action == "edit" and kept is not None and not kept.override:
            return schedule_changes.edit(found, alias, kept, options)
        if action == "edit":
            return schedule_changes.override(alias, name, kept, options)
        if action == "reset":
            return schedule_changes.reset(alias, name, kept, job)
        return schedule_changes.remove(alias, name, kept, job)
