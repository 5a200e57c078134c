"""``manage.py cronworker``: run the scheduler in every replica; each tick runs once."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

from django.core.management.base import CommandParser
from django.db import ProgrammingError

from ... import exitcodes
from ...conf import app_settings
from ...db.connections import bound_connect
from ...delivery import targets
from ...exceptions import DatabaseUnavailable, InvalidSchedule, LockDatabaseError
from ...worker.children import ISOLATIONS
from ...worker.loop import Worker
from ...worker.narration import Narrator
from ..arguments import CONCURRENCY, WAIT, text
from ..base import AppCommand, no_job_named
from ..runs import outcome

EPILOG = """\
Run the same command in every replica, next to the web process: each tick of each scheduled
job runs once, whichever replicas are up (the others skip it and write nothing). No leader,
no cron daemon. A paused job's ticks are skipped; "manage.py cronjob trigger JOB" makes one
worker run it now.

Runs go to threads, or with --isolation process to a fresh process each; a job with a
timeout always runs in a process of its own, stopped and recorded as timed out when it runs
too long. A job whose previous run is still going when its next tick comes skips that tick
(recorded once, as skipped_locked, by the worker running it).

On SIGTERM or SIGINT it starts nothing new, gives running jobs --grace seconds (processes get
SIGTERM shortly before it ends), records those still running as interrupted and exits.

output (stdout, whatever LOGGING says; the log records say the same):
  -v 0  only runs that did not succeed, errors, and the line it stops with
  -v 1  (the default) also the jobs it follows with their next tick, how it waits
        (LISTEN/NOTIFY or polling) and the lock database, then one line per run: job,
        tick, outcome, duration
  -v 2  also each skipped tick and each schedule change
  The stop line counts each tick and run-now request it took up once: ran (of which
  failed), skipped (another replica had it; of those, how many were seen claimed before
  trying their locks), paused, overlapped (the job's previous run was still going), not
  run (it stopped first, or the database was away).

exit codes:
  2    usage error: unknown job name, none of the jobs named has a schedule, bad
       option, invalid schedule
  69   the lock database cannot be reached
  78   configuration error: the lock database is not PostgreSQL, the app's tables are
       missing (run migrate), a job must run in a process and the settings are not a
       module a child process can load, a job's deliver= cannot work here (no Tasks
       framework, unknown backend, no Celery or no Celery app), or a system check of
       django-advisory-cron reports an error (one line each; manage.py check shows them all;
       --skip-checks starts anyway)
  130  stopped by SIGINT, 143 by SIGTERM
"""


#: Seconds a stopping worker waits for its queued output lines to be written.
NARRATION_FLUSH = 2.0


class Command(AppCommand):
    epilog = EPILOG
    help = (
        "Run every scheduled job at each of its ticks, in every replica at once: the database "
        "lets exactly one replica run each tick."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "jobs",
            nargs="*",
            type=text,
            metavar="JOB",
            help="only these jobs: their ticks, and run-now requests for them (default: all)",
        )
        parser.add_argument(
            "--grace",
            type=WAIT,
            default=25.0,
            metavar="SECONDS",
            help=f"on SIGTERM/SIGINT, wait this long for running jobs ({WAIT.bounds}; default "
            "25, inside Kubernetes' default 30 s)",
        )
        parser.add_argument(
            "--max-concurrency",
            type=CONCURRENCY,
            default=32,
            metavar="N",
            help=f"run at most N jobs ({CONCURRENCY.bounds}) at once in this worker, in threads "
            "and processes together; a run due while all N are busy waits for one (default 32)",
        )
        parser.add_argument(
            "--isolation",
            default="thread",
            metavar="{thread,process}",
            help="run each job in a pool thread (default) or in a process of its own; a job "
            "with a timeout always runs in a process",
        )
        parser.add_argument(
            "--database", default=None, metavar="ALIAS", help="database alias holding the locks"
        )

    def _say(self, line: str) -> None:
        """Write one line of the worker's output at once (a process manager shows it live);
        what the stream cannot encode (a job's undecodable bytes in its error) is escaped."""
        encoding = getattr(self.stdout, "encoding", None) or "utf-8"
        self.stdout.write(line.encode(encoding, "backslashreplace").decode(encoding))
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        if options["isolation"] not in ISOLATIONS:
            self.leave(
                exitcodes.USAGE,
                f"--isolation must be thread or process, not {options['isolation']!r}",
            )
        alias = options["database"] or app_settings.lock_database
        found = self.catalog(alias)
        unknown = [name for name in options["jobs"] if name not in found]
        if unknown:
            self.leave(exitcodes.USAGE, no_job_named(unknown, "see cronjob list", found.jobs))
        jobs = [found.get(name) for name in options["jobs"]] or found.all()
        scheduled = []
        for job in jobs:
            try:
                if job.schedule is not None:
                    scheduled.append(job)
            except InvalidSchedule as error:
                self.leave(exitcodes.USAGE, f"job {job.name!r}: {error}")
        if not scheduled and options["jobs"]:
            self.leave(
                exitcodes.USAGE,
                "no scheduled job to run: give a job a schedule (in code, or with "
                "manage.py cronjob add)",
            )
        if not scheduled and not found.definitions:
            # Operators add schedules at run time: a fleet deployed before the first one stays
            # up (a restart policy would crash-loop it) and follows the schedules.
            self.stdout.write(
                "cronworker: no scheduled job yet; waiting for one (a schedule in code, or "
                "manage.py cronjob add), taken up when it is added"
            )
            self.stdout.flush()
        for job in scheduled:
            try:
                deliverer = targets.deliverer_for(job)
            except targets.DeliveryError as error:
                self.leave(exitcodes.CONFIG, str(error))
            problems = deliverer.problems(job) if deliverer is not None else []
            if problems:
                self.leave(exitcodes.CONFIG, problems[0])
        worker = Worker(
            jobs,
            everything=not options["jobs"],
            using=alias,
            max_concurrency=options["max_concurrency"],
            grace=options["grace"],
            isolation=options["isolation"],
            narrator=Narrator(self._say, options["verbosity"]),
        )
        try:
            worker.check_processes()
        except ValueError as error:
            self.leave(exitcodes.CONFIG, str(error))
        stopped_by: list[int] = []

        def stop(signum: int, frame: FrameType | None) -> None:
            stopped_by.append(signum)
            worker.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            bound_connect(alias)
            worker.run()
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(error))
        except LockDatabaseError as error:
            self.leave(exitcodes.CONFIG, str(error))
        except ProgrammingError as error:
            # The database refused the worker's statements (its tables are missing): the line
            # runlocked prints for the same cause.
            self.leave(*outcome(scheduled[0].name if scheduled else "cronworker", error, None))
        worker.narrator.close(timeout=NARRATION_FLUSH)
        stats = worker.stats
        unsaid = (
            f"; {worker.narrator.dropped} line(s) not printed (stdout was not read)"
            if worker.narrator.dropped
            else ""
        )
        self.stdout.write(
            f"cronworker {worker.identity}: stopped; took up {stats.taken} tick(s) and "
            f"run-now request(s) ({stats.manual} run-now): {stats.ran} ran ({stats.failed} "
            f"of them failed), {stats.skipped} skipped (another replica had them; "
            f"{stats.seen_claimed} seen claimed before trying), "
            f"{stats.paused} paused, {stats.overlapped} tick(s) skipped because the job's previous "
            f"run was still going, {stats.not_run} not run (stopping, or the database away), "
            f"{stats.waiting} kept waiting for the job's run going (overlap buffer_one, "
            "buffer_all); "
            f"{stats.batches} claim statement(s) took several jobs' ticks at once{unsaid}"
        )
        if stats.delivered:
            self.stdout.write(
                f"cronworker: handed {stats.delivered} tick(s) to a task queue: "
                f"{stats.enqueued} enqueued, "
                f"{stats.enqueued_elsewhere + stats.already_ran} not enqueued "
                f"({stats.enqueued_elsewhere} enqueued by another scheduler, "
                f"{stats.already_ran} already ran), {stats.not_enqueued} could not be "
                f"enqueued, {stats.delivery_paused} paused"
            )
        code = exitcodes.SIGINT if stopped_by[:1] == [signal.SIGINT] else exitcodes.SIGTERM
        if worker.stopped_children:
            self.stderr.write(
                f"cronworker: {worker.stopped_children} run(s) in child processes were still "
                f"going at the end of the {worker.grace:g} s grace: stopped and recorded as "
                "interrupted"
            )
        if worker.abandoned:
            self.stderr.write(
                f"cronworker: {len(worker.abandoned)} run(s) still going after "
                f"{worker.grace:g} s of grace, recorded as interrupted"
            )
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # their threads cannot be stopped; their locks go with the process
        sys.exit(code)
