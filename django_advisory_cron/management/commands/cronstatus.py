"""``manage.py cronstatus [--json]``: a health probe for scheduled jobs.

Exit 0 when every job is healthy and non-zero otherwise, so the command works as a Kubernetes
exec probe, an uptime check or a cron ``&&`` guard. The facts come from
[status][django_advisory_cron.ops.status], as on the admin's Jobs page.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser
from django.db import DatabaseError, OperationalError, ProgrammingError

from ... import exitcodes
from ...conf import app_settings
from ...db.connections import require_postgresql, unavailable
from ...exceptions import CommandFailed, DatabaseUnavailable, LockDatabaseError, first_line
from ...ops.status import (
    PROBLEMS,
    JobStatus,
    health_report,
    missing_workers,
    statuses_and_workers,
    unhealthy,
)
from ...worker.fleet import LiveWorker
from ..arguments import WORKERS, text
from ..base import AppCommand, no_job_named

EPILOG = """\
exit codes:
  0    healthy: no job is overdue, late, stuck or failing (or all such problems are
       --ignore'd)
  1    the command itself failed (the database refused its query)
  2    usage error (unknown --job or --tenant)
  3    unhealthy: at least one job is overdue, late (past its late_after target), stuck
       (stale lock) or failing, or fewer
       cronworker processes are alive than --expect-workers (EXPECT_WORKERS) asks for
  69   the lock database cannot be reached
  78   configuration error: the app's tables are missing (run migrate), or a system check
       of django-advisory-cron reports an error (one line each; manage.py check shows them
       all; --skip-checks starts anyway)
"""


class CronStatusError(CommandFailed):
    """``cronstatus`` could not answer: a ``CommandError`` and an ``AdvisoryCronError``."""


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Report jobs that are overdue, late (past their late_after target), stuck (stale lock) "
        "or failing; exit non-zero if any."
    )
    # A probe runs every few seconds and must answer about jobs, not about the whole project.

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.add_argument(
            "--job",
            action="append",
            type=text,
            default=None,
            metavar="NAME",
            help="only this job (repeat)",
        )
        parser.add_argument(
            "--tenant",
            type=text,
            default=None,
            metavar="SCHEMA",
            help="only the per-tenant jobs' runs for this tenant schema (django-tenants)",
        )
        parser.add_argument(
            "--ignore",
            action="append",
            default=[],
            choices=PROBLEMS,
            help="do not count this kind of problem as unhealthy (repeat)",
        )
        parser.add_argument(
            "--all", action="store_true", help="list every job, not only those with problems"
        )
        parser.add_argument(
            "--expect-workers",
            type=WORKERS,
            default=None,
            metavar="N",
            help=f"unhealthy while scheduled jobs exist and fewer than N ({WORKERS.bounds}) "
            "cronworker processes are alive (default: the EXPECT_WORKERS setting, 0)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] | None = options["job"]
        expected = options["expect_workers"]
        if expected is None:
            expected = app_settings.EXPECT_WORKERS
        try:
            require_postgresql(app_settings.lock_database)
        except LockDatabaseError as error:
            raise CronStatusError(str(error), exitcodes.CONFIG) from error
        try:
            statuses, workers = statuses_and_workers(names)
        except DatabaseUnavailable as error:
            raise CronStatusError(str(error), exitcodes.DATABASE_UNAVAILABLE) from error
        except OperationalError as error:
            raise CronStatusError(
                str(unavailable(app_settings.lock_database, error)), exitcodes.DATABASE_UNAVAILABLE
            ) from error
        except ProgrammingError as error:
            raise CronStatusError(
                f"{first_line(error)} (are the app's tables missing? run manage.py migrate)",
                exitcodes.CONFIG,
            ) from error
        except DatabaseError as error:
            raise CronStatusError(first_line(error)) from error
        if names:
            # A per-tenant job's name stands for its tenants' (name@schema).
            found = {item.name for item in statuses}
            found |= {item.name.rpartition("@")[0] for item in statuses if item.job.tenant}
            unknown = sorted(set(names) - found)
            if unknown:
                raise CronStatusError(no_job_named(unknown, "see cronjob list"), exitcodes.USAGE)
        tenant = options["tenant"]
        if tenant is not None:
            statuses = [item for item in statuses if item.job.tenant == tenant]
            if not statuses:
                raise CronStatusError(
                    f"no per-tenant job runs for tenant {tenant!r}; see cronstatus --all",
                    exitcodes.USAGE,
                )
        ignore = tuple(options["ignore"])
        bad = unhealthy(statuses, ignore)
        problem = missing_workers(statuses, workers, expected)
        if options["json"]:
            report = health_report(statuses, ignore, workers, expected)
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self._print(statuses if options["all"] else bad, bad, len(statuses))
            self._print_workers(workers, problem, expected or options["all"])
        if bad or problem:
            raise SystemExit(exitcodes.UNHEALTHY)

    def _print(self, shown: list[JobStatus], bad: list[JobStatus], total: int) -> None:
        for item in shown:
            self.stdout.write(self.style.ERROR(item.summary) if item in bad else item.summary)
        summary = f"{len(bad)} of {total} job(s) unhealthy" if bad else f"{total} job(s) healthy"
        self.stdout.write(self.style.ERROR(summary) if bad else self.style.SUCCESS(summary))

    def _print_workers(self, workers: list[LiveWorker], problem: str, wanted: object) -> None:
        if problem:
            self.stdout.write(self.style.ERROR(problem))
        elif workers or wanted:
            since = ", ".join(
                f"{worker.identity} since {worker.since.isoformat(timespec='seconds')}"
                for worker in workers
            )
            self.stdout.write(
                f"{len(workers)} cronworker(s) alive" + (f": {since}" if since else "")
            )
