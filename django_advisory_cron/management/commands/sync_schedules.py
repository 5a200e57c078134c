"""``manage.py sync_schedules [--dry-run] [--prune]``: one django-q2 Schedule per scheduled job.

Safe to run on every replica at start-up: concurrent runs serialise on an advisory lock, and a
second run finds nothing to change.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Create or update one django-q2 CRON Schedule per job registered with a schedule. "
        "Rows made by hand are never touched; rows of removed jobs are deleted with --prune."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would change; change nothing."
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Delete synced rows whose job is gone or no longer has a schedule.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not apps.is_installed("django_q"):
            raise CommandError(
                "django_q is not in INSTALLED_APPS: install 'django-advisory-cron[q2]' and add "
                "'django_q' to INSTALLED_APPS to schedule jobs through django-q2."
            )
        from ...contrib.django_q import sync

        dry_run: bool = options["dry_run"]
        try:
            changes = sync(prune=options["prune"], dry_run=dry_run)
        except TimeoutError as error:
            raise CommandError(str(error)) from error
        counts: dict[str, int] = {}
        for change in changes:
            counts[change.action] = counts.get(change.action, 0) + 1
            if change.action == "unchanged" and options["verbosity"] < 2:
                continue
            style = self.style.WARNING if change.action in ("stale", "invalid") else str
            self.stdout.write(style(change.describe(dry_run=dry_run)))
        summary = ", ".join(f"{action} {count}" for action, count in sorted(counts.items()))
        prefix = "dry run: " if dry_run else ""
        self.stdout.write(f"{prefix}{summary or 'no scheduled jobs'}")
