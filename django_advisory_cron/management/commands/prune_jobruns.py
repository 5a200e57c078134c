"""``manage.py prune_jobruns``: delete run history older than ``HISTORY_DAYS``, in batches.

Small batches keep each transaction (and its row locks and WAL) short, so pruning a large
history never blocks the runner. Unfinished (``running``) rows and each job's latest success
are kept whatever their age: the Jobs page and ``cronstatus`` need the latter to tell an
overdue job from one that never ran. Run it from cron itself, e.g.
``manage.py runlocked prune_jobruns``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from ...conf import app_settings
from ...models import JobRun, RunStatus


class Command(BaseCommand):
    help = "Delete job run history older than ADVISORY_CRON['HISTORY_DAYS'] days, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days", type=int, default=None, help="keep this many days (default: HISTORY_DAYS)"
        )
        parser.add_argument("--batch-size", type=int, default=1000, help="rows per transaction")
        parser.add_argument("--job", default=None, help="only prune this job's history")
        parser.add_argument("--dry-run", action="store_true", help="count, do not delete")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"] if options["days"] is not None else app_settings.HISTORY_DAYS
        if days is None:
            self.stdout.write("HISTORY_DAYS is None: history is kept forever; nothing to do.")
            return
        if days <= 0 or options["batch_size"] <= 0:
            raise CommandError("--days and --batch-size must be positive")
        deleted = prune(days, options["batch_size"], options["job"], options["dry_run"])
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(f"{verb} {deleted} run(s) older than {days} day(s)")


def prunable(days: int, job: str | None = None) -> Any:
    """Rows older than ``days`` days, minus running rows and each job's latest success."""
    alias = app_settings.lock_database
    runs = JobRun.objects.using(alias)
    latest_success = (
        runs.filter(status=RunStatus.SUCCEEDED)
        .order_by("job", "-started", "-id")
        .distinct("job")
        .values("id")
    )
    old = runs.filter(started__lt=timezone.now() - timedelta(days=days))
    if job is not None:
        old = old.filter(job=job)
    return old.exclude(status=RunStatus.RUNNING).exclude(id__in=latest_success)


def prune(days: int, batch_size: int = 1000, job: str | None = None, dry_run: bool = False) -> int:
    """Delete prunable rows ``batch_size`` at a time; return how many (would) go."""
    if dry_run:
        return int(prunable(days, job).count())
    alias = app_settings.lock_database
    total = 0
    while True:
        with transaction.atomic(using=alias):
            ids = list(prunable(days, job).order_by("id").values_list("id", flat=True)[:batch_size])
            if not ids:
                return total
            JobRun.objects.using(alias).filter(id__in=ids).delete()
        total += len(ids)
