"""``manage.py prune_jobruns``: delete run history older than ``HISTORY_DAYS``, in batches.

A thin wrapper around ``JobRun.objects.prune()``: small batches keep each transaction short, so
pruning a large history never blocks the runner. Kept whatever their age:

- runs whose body may still be running: ``running`` rows, and rows whose lease has not expired
  (a ``lock_lost`` run goes on until its body ends or its lease runs out);
- each job's latest recorded tick (its row with the greatest tick among the statuses that take
  a tick, and its latest row with a tick, skips included): ``cronworker`` catches up the ticks
  after it, so pruning it would run a tick again;
- each job's latest success: the Jobs page and ``cronstatus`` need it to tell an overdue job
  from one that never ran.

Run it from cron itself, e.g. ``manage.py runlocked prune_jobruns``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandParser
from django.db import InterfaceError, OperationalError, ProgrammingError
from django.utils import timezone

from ... import exitcodes
from ...conf import app_settings
from ...db.connections import require_postgresql, unavailable
from ...exceptions import LockDatabaseError, first_line
from ...models import JobRun
from ..arguments import BATCH, DAYS, text
from ..base import AppCommand

EPILOG = """\
exit codes:
  0    pruned (or nothing to prune, or HISTORY_DAYS is None: history is kept forever)
  2    usage error: a bad option (--days or --batch-size out of its bounds)
  69   the lock database cannot be reached, or is read-only (nothing was deleted)
  78   configuration error: the lock database is not PostgreSQL, the app's tables are
       missing (run migrate), or a system check of django-advisory-cron reports an error
       (one line each; manage.py check shows them all; --skip-checks starts anyway)
"""


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Delete job run history older than ADVISORY_CRON['HISTORY_DAYS'] days, in batches. "
        "Whatever their age, it keeps the runs still going (or still within their lease), each "
        "job's latest recorded tick (so no tick runs again) and each job's latest success."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=DAYS,
            default=None,
            help=f"keep this many days ({DAYS.bounds}; default: HISTORY_DAYS)",
        )
        parser.add_argument(
            "--batch-size",
            type=BATCH,
            default=1000,
            metavar="N",
            help=f"rows per transaction ({BATCH.bounds}; default: %(default)s)",
        )
        parser.add_argument("--job", type=text, default=None, help="only prune this job's history")
        parser.add_argument("--dry-run", action="store_true", help="count, do not delete")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"] if options["days"] is not None else app_settings.HISTORY_DAYS
        if days is None:
            self.stdout.write("HISTORY_DAYS is None: history is kept forever; nothing to do.")
            return
        try:
            require_postgresql(app_settings.lock_database)
            deleted = prune(days, options["batch_size"], options["job"], options["dry_run"])
        except LockDatabaseError as error:
            self.leave(exitcodes.CONFIG, str(error))
        except (OperationalError, InterfaceError) as error:
            alias = app_settings.lock_database
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(unavailable(alias, error)))
        except ProgrammingError as error:
            self.leave(
                exitcodes.CONFIG,
                f"{first_line(error)} (are the app's tables missing? run manage.py migrate)",
            )
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(f"{verb} {deleted} run(s) older than {days} day(s)")


def prune(days: int, batch_size: int = 1000, job: str | None = None, dry_run: bool = False) -> int:
    """Delete runs older than ``days`` days (see ``JobRun.objects.prune``); return how many."""
    runs = JobRun.objects.using(app_settings.lock_database)
    if job is not None:
        runs = runs.filter(job=job)
    older_than = timezone.now() - timedelta(days=days)
    if dry_run:
        return runs.prunable(older_than).count()
    return runs.prune(older_than, batch_size)
