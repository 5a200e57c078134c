"""``manage.py sync_schedules [--dry-run] [--prune]``: one django-q2 Schedule per scheduled job.

Safe to run on every replica at start-up: concurrent runs serialise on an advisory lock, and a
second run finds nothing to change.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import CommandParser

from ...exceptions import CommandFailed
from ..base import AppCommand

EPILOG = """\
exit codes:
  0    in sync (or, with --dry-run, the changes were printed)
  1    django_q is not installed, or the database refused a change
  2    usage error: bad option
  78   configuration error: a system check of django-advisory-cron reports an error (one
       line each; manage.py check shows them all; --skip-checks starts anyway)
"""


class Command(AppCommand):
    epilog = EPILOG
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
            raise CommandFailed(
                "django_q is not in INSTALLED_APPS: install 'django-advisory-cron[q2]' and add "
                "'django_q' to INSTALLED_APPS to schedule jobs through django-q2."
            )
        from ...contrib.django_q import sync, tally

        dry_run: bool = options["dry_run"]
        try:
            changes = sync(prune=options["prune"], dry_run=dry_run)
        except TimeoutError as error:  # ScheduleSyncTimeout is one
            raise CommandFailed(str(error)) from error
        for change in changes:
            if change.action == "unchanged" and options["verbosity"] < 2:
                continue
            style = (
                self.style.WARNING if change.action in ("stale", "invalid", "elsewhere") else str
            )
            self.stdout.write(style(change.describe(dry_run=dry_run)))
        prefix = "dry run: " if dry_run else ""
        self.stdout.write(f"{prefix}{tally(changes) or 'no scheduled jobs'}")
