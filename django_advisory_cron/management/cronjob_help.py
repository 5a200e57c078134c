"""What ``manage.py cronjob -h`` and each ``cronjob ACTION -h`` say: a line per action, what
it does in full, its exit codes beyond the command's and an example; the command itself wires
the arguments ([cronjob][django_advisory_cron.management.commands.cronjob])."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, NamedTuple

from django.core.management.base import CommandParser

from . import backfill


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


def add_action(actions: Any, name: str) -> CommandParser:
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
