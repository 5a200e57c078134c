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
[importers][django_advisory_cron.management.importers]."""

from __future__ import annotations

import argparse
import sys
import textwrap
from datetime import datetime
from typing import Any, NamedTuple

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
from ...run.control import operator
from ...run.runner import RunResult
from .. import backfill, importers, job_actions, listing, schedule_changes
from ..arguments import LIMIT, VERSION, Count
from ..arguments import text as utf8_text
from ..base import AppCommand, UsageParser, cannot_run, no_job_named
from ..crontab import crontab_lines
from ..runs import outcome
from ..schedule_options import SCHEDULE_OPTIONS, Refused


class Action(NamedTuple):
    """One action of ``cronjob``: its line in ``cronjob -h``, and its own ``-h``."""

    #: Its arguments, as its ``-h`` names them.
    arguments: str
    #: One line in ``cronjob -h``.
    summary: str
    #: What it does, in full, in its own ``-h``.
    text: str
    #: A command line that uses it, at the end of its own ``-h``.
    example: str
    #: What its exit codes mean beyond ``cronjob -h``'s: (code, meaning) pairs.
    exits: tuple[tuple[str, str], ...] = ()


ACTIONS = {
    "list": Action(
        "",
        "list the jobs and their state",
        "every registered job: schedule, paused or not, pending run-now, its next tick, its "
        "last run (skips aside) and how that ended, where its ticks run (its deliver=, "
        "or - for in place), and where it is defined (SOURCE: code, settings for "
        "ADVISORY_CRON['SCHEDULES'], or database; 'code, overridden: schedule' when an "
        "override in the database changes it). A database schedule that cannot run is named "
        "after the table, with why",
        "manage.py cronjob list --json",
    ),
    "history": Action(
        "JOB",
        "show a job's last runs",
        "JOB's last runs, newest first (--limit N, default 20): status, host, pid, start, "
        "duration and the first line of the error; --output prints what each run captured "
        "(its log records, a command's output) under it",
        "manage.py cronjob history send_daily_digest --limit 5 --output",
    ),
    "next": Action(
        "JOB",
        "show a job's next ticks",
        "JOB's next ticks (-n N, default 10), from the database's clock, each in the zone its "
        "schedule is read in (an interval's in TIME_ZONE) with its UTC offset; a change of "
        "that offset (daylight saving time begins or ends) and a tick a pause will skip are "
        "marked",
        "manage.py cronjob next send_daily_digest -n 5",
        (("2", "no job of that name, or a job with no schedule"),),
    ),
    "crontab": Action(
        "",
        "print crontab lines that run the scheduled jobs",
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
        "manage.py cronjob crontab | crontab -",
    ),
    "pause": Action(
        "JOB",
        "pause a job",
        "skip JOB's ticks instead of running them, in cronworker and "
        "runlocked alike, until resumed (or --until WHEN: a duration such as 30m, 2h, 1d, or "
        "an ISO 8601 date-time)",
        'manage.py cronjob pause send_daily_digest --until 2h --reason "mail relay down"',
        (("2", "no job of that name, or a bad --until or --tenant"),),
    ),
    "resume": Action(
        "JOB",
        "resume a paused job",
        "run JOB's ticks again",
        "manage.py cronjob resume send_daily_digest",
    ),
    "trigger": Action(
        "JOB",
        "run a job now, in a running cronworker",
        "ask the running cronworkers to run JOB now: one of them starts it within about a "
        "second, as a manual run (no tick; under the lock, so never beside another run of "
        "JOB; a pause does not hold it back). With no cronworker connected nothing is "
        "recorded (exit 4); --here runs it in this process instead.",
        "manage.py cronjob trigger send_daily_digest",
        (
            ("0", "requested (--here: the job ran, or was skipped as runlocked says)"),
            ("1", "--here: the job raised (recorded as failed)"),
            ("2", "no job of that name, or a bad --tenant"),
            ("4", "no cronworker is connected to the database, nothing was recorded"),
            ("75, 130, 143", "--here: as for runlocked"),
        ),
    ),
    "backfill": Action(
        "JOB --start WHEN [--end WHEN]",
        "run the past ticks of a range that have no run",
        "run JOB here for every tick of its schedule from --start to --end (default: now) that "
        "has no run yet (none that succeeded, failed, timed out, lost its lock or is running), "
        "oldest first, each through the same claim as a scheduled run of it: a tick runs once "
        "even with two backfills of one range at once or cronworkers beside them. It waits "
        "for the job's lock while another run of it goes on. Each run is recorded with its "
        "tick and marked as a backfill. WHEN: an ISO 8601 date-time (without an offset, in "
        "TIME_ZONE) or a duration back from now (2d, 6h, 1h30m). --dry-run lists the ticks it "
        f"would run. At most {backfill.MOST:,} ticks a range; a SIGTERM or Ctrl-C stops it "
        "after recording the run it interrupted",
        'manage.py cronjob backfill send_daily_digest --start 2026-12-01 --end "2026-12-04 23:59"',
        (
            ("0", "every tick of the range has run (here, or before)"),
            ("1", "a run it started failed (recorded as failed; the others went on)"),
            (
                "2",
                "no job of that name, a bad --start or --end, a job with no schedule or sent "
                "to a task queue, or a range of too many ticks (nothing ran)",
            ),
            ("130, 143", "stopped by SIGINT or SIGTERM (the run it stopped is recorded)"),
        ),
    ),
    "add": Action(
        "NAME",
        "add a schedule kept in the database",
        "add a schedule kept in the database, named NAME (its runs, lock and ticks go by it): "
        "it calls a registered job (--job, with --args and --kwargs as JSON) or a management "
        "command (--command, with --args), on a cron --schedule (read in --timezone, else "
        "TIME_ZONE) or --every N seconds. Running cronworkers follow at once; cron can call "
        "'runlocked NAME'",
        "manage.py cronjob add weekly-report --job send_digest --args '[\"weekly\"]' "
        '--schedule "0 7 * * 1"',
        (
            (
                "2",
                "a schedule that cannot run (one line saying why: unknown job or command, "
                "arguments it does not take, a bad cron expression or zone, a name taken, "
                "...), nothing was written",
            ),
        ),
    ),
    "edit": Action(
        "NAME",
        "change a schedule, or override a code job's",
        "change the database schedule NAME: only the options given change (those of add; "
        "--enable or --disable; an empty value clears an option). For a job defined in code "
        "or in ADVISORY_CRON['SCHEDULES'], change its --schedule, --every or --timezone, or "
        "--enable/--disable it: an override kept in the database, until reset",
        'manage.py cronjob edit send_daily_digest --schedule "30 2 * * *"',
        (
            (
                "2",
                "no schedule or job of that name, or a schedule that cannot run (one line "
                "saying why), nothing was written",
            ),
        ),
    ),
    "reset": Action(
        "NAME",
        "drop a code job's override",
        "drop the override of job NAME: its schedule is the one in code (or settings) again",
        "manage.py cronjob reset send_daily_digest",
        (
            ("0", "done, also when there was no override"),
            ("2", "a database schedule, with nothing to reset"),
        ),
    ),
    "remove": Action(
        "NAME",
        "delete a schedule kept in the database",
        "delete the database schedule NAME (its run history stays). A job defined in code or "
        "settings is removed there; reset drops its override",
        "manage.py cronjob remove weekly-report",
        (("2", "a job defined in code or settings (nothing was removed)"),),
    ),
    "versions": Action(
        "NAME",
        "list a schedule's versions",
        "every version of the database schedule or override NAME, newest first: its number, "
        "when, who (the admin user, or user@host for cronjob), the note, and what changed "
        "(field: old -> new). Each write of the row keeps one, whatever made it",
        "manage.py cronjob versions weekly-report --json",
        (("2", "no schedule of that name has versions"),),
    ),
    "revert": Action(
        "NAME VERSION",
        "make a schedule what one of its versions says",
        "give the database schedule or override NAME the values of its version VERSION (a "
        "version that removed it removes it again), checked as edit checks a change; the "
        "revert is a version of its own, with --note. Running cronworkers follow at once",
        'manage.py cronjob revert weekly-report 3 --note "the 7:00 run overlapped the backup"',
        (("2", "no such schedule or version, or one that cannot run now; nothing was written"),),
    ),
    "import": Action(
        "--from SOURCE",
        "add the schedules of another scheduler",
        "add the schedules of celery-beat (CELERY_BEAT_SCHEDULE), django-celery-beat (its "
        "periodic tasks), crontab (django-crontab's CRONJOBS) or django-q2 (its schedules) "
        "as database schedules, each under its name there made shell-safe (or as the schedule "
        "of the code job it is named after; docs/coming-from.md says how), calling the job whose "
        "name or dotted path it names, or a management command; a line per "
        "entry: what it became, or why it cannot map. --deliver celery (celery-beat, "
        "django-celery-beat) makes each schedule send its Celery task, on its queue, to Celery "
        "instead. --dry-run writes nothing. A second import finds what the first one added "
        "and changes nothing; nothing is removed from the source",
        "manage.py cronjob import --from celery-beat --dry-run",
        (
            (
                "2",
                "the source cannot be read here (nothing written), or some of its entries "
                "could not be imported (each said why; the others were)",
            ),
        ),
    ),
}

#: How many ticks ``cronjob next`` may list.
TICKS = Count(1, upcoming.MOST)

#: The width ``-h`` wraps its texts to.
WIDTH = 79

EPILOG = """\
'cronjob ACTION -h' says what an action does, its options and exit codes, with an
example. Django's common options (--settings, --pythonpath, ...) work as usual.

exit codes:
  0    done
  2    usage error (an unknown job, a bad value), or a schedule that cannot run
  4    trigger: no cronworker is connected to the database, nothing was recorded
  69   the lock database cannot be reached, or is read-only (nothing was changed)
  78   configuration error: run migrate; not PostgreSQL; a system check failed
  1, 75, 130, 143   trigger --here, backfill: as runlocked (1: a run failed)
"""


def _described(name: str) -> str:
    """What action ``name`` does, as ``cronjob ACTION -h`` says it (a paragraph of its own)."""
    action = ACTIONS[name]
    said = f"{name} {action.arguments}".rstrip() + f": {action.text.rstrip('.')}."
    return textwrap.fill(said, WIDTH)


def _add(actions: Any, name: str) -> CommandParser:
    """The parser of action ``name``, with its line in ``cronjob -h`` and its own ``-h``."""
    parser: CommandParser = actions.add_parser(
        name,
        help=ACTIONS[name].summary,
        description=_described(name),
        epilog=_example(name),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _example(name: str) -> str:
    """The end of ``cronjob ACTION -h``: its exit codes beyond the common ones, an example."""
    exits = "".join(
        textwrap.fill(meaning, WIDTH, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        + "\n"
        for code, meaning in ACTIONS[name].exits
    )
    said = f"exit codes (beside those of cronjob -h):\n{exits}\n" if exits else ""
    return f"{said}example:\n  {ACTIONS[name].example}\n"


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
        jobs = _add(actions, "list")
        jobs.add_argument("--json", action="store_true", help="print one JSON document")
        history = _add(actions, "history")
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
        ahead = _add(actions, "next")
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
        _add(actions, "crontab")
        pause = _add(actions, "pause")
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
        resume = _add(actions, "resume")
        resume.add_argument("job", type=utf8_text, metavar="JOB")
        trigger = _add(actions, "trigger")
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
        backfilled = _add(actions, "backfill")
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
        add = _add(actions, "add")
        edit = _add(actions, "edit")
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
        _add(actions, "reset").add_argument("job", type=utf8_text, metavar="NAME")
        _add(actions, "remove").add_argument("job", type=utf8_text, metavar="NAME")
        kept = _add(actions, "versions")
        kept.add_argument("job", type=utf8_text, metavar="NAME")
        kept.add_argument("--json", action="store_true", help="print one JSON document")
        reverted = _add(actions, "revert")
        reverted.add_argument("job", type=utf8_text, metavar="NAME")
        reverted.add_argument("version", type=VERSION, metavar="VERSION")
        imported = _add(actions, "import")
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
            + (" (dry run: nothing runs)" if options["dry_run"] else "")
        )
        if options["dry_run"]:
            self._write([f"  would run tick {tick.isoformat()}" for tick in pending])
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
