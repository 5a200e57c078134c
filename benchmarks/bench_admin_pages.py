"""Whether the admin pages and the read endpoints stay flat as the run history grows.

Run on demand: ``python benchmarks/bench_admin_pages.py [--jobs N] [--steps 100000,1000000]``.
Uses DATABASE_URL or starts a durable throwaway PostgreSQL (``fsync`` and
``synchronous_commit`` on). Registers ``--jobs`` jobs and fills their
history to each step in turn (one ``INSERT ... SELECT generate_series`` per step, older rows
added below the newer ones, ``VACUUM ANALYZE`` after each, as autovacuum would leave it): one
row every ``--spacing`` seconds, 7.776 s by default, so 1,000,000 rows are the default 90 days
of ``HISTORY_DAYS``. The mix: 70 % succeeded, 5 % failed, 2.5 % each timed out, interrupted and
lock lost, 15 % skips, 2.5 % manual runs without a tick, and one job in 50 that never
succeeded (its runs all failed); one tick per job and run, as the partial unique index on
``(job, tick)`` requires.

At each step it times whole requests through Django's test client (rendering included;
the requests take turns, median of ``--repeat`` after a warm-up): the Job runs page plain,
filtered by job, by status, drilled down to a month and to a day; a run's page; the Jobs
page (its first page, its second, and searched: ``bench.job7`` matches 11 jobs); Held locks;
``metrics/``; and ``cronstatus --json``, each as a ratio to the admin index page measured in
the same run, with the queries Django sent for it and, where the server counts them
(``pg_stat_statements``), the top-level statements it ran and the milliseconds it spent
planning and executing them per request. Then where the Jobs page's time goes: the server's
part, the schedule arithmetic (each job's last expected tick, for its health, and the next
tick of the jobs shown) timed apart, and the rest (the view, the ORM, the rendering). Last,
the growth from the first step to the last, in milliseconds and in that ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import hourly_jobs_and_admin, setup
from benchmarks.measure import Observer, interleaved

FILL = """
INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, status,
                                         error, manual)
SELECT 'bench.job' || (g %% %(jobs)s), CASE WHEN k = 39 THEN NULL ELSE date_trunc('minute', at) END,
       'web-' || (g %% 3), g %% 30000, at, at + make_interval(secs => 1 + g %% 7),
       CASE WHEN (k < 28 OR k = 39) AND g %% %(jobs)s %% 50 = 0 THEN 'failed'
            WHEN k < 28 OR k = 39 THEN 'succeeded' WHEN k < 30 THEN 'failed'
            WHEN k = 30 THEN 'timed_out' WHEN k = 31 THEN 'interrupted'
            WHEN k = 32 THEN 'lock_lost' WHEN k < 36 THEN 'skipped_tick'
            WHEN k < 38 THEN 'skipped_locked' ELSE 'skipped_paused' END,
       CASE WHEN k IN (28, 29) THEN E'Traceback (most recent call last):\\nRuntimeError: disk full'
            ELSE '' END,
       k = 39
FROM (SELECT g, (g / %(jobs)s) %% 40 AS k,
             %(anchor)s::timestamptz - make_interval(secs => g * %(spacing)s) AS at
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS rows
"""


def schedule_arithmetic(jobs: list[Any], shown: int) -> Callable[[], None]:
    """What the Jobs page computes from the schedules, as a call: every job's last expected
    tick (its health: overdue or not) and the next tick of the ``shown`` first."""
    from django.utils import timezone

    from django_advisory_cron.ops.status import JobStatus

    def ticks() -> None:
        now = timezone.now()
        for number, item in enumerate(JobStatus(job, now) for job in jobs):
            _ = item.expected_tick, number < shown and item.next_tick

    return ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--steps", default="100000,1000000", help="history sizes, ascending")
    parser.add_argument("--spacing", type=float, default=7.776, help="seconds between rows")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    steps = [int(step) for step in args.steps.split(",")]

    server, url = setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext, override_settings
    from django.utils import timezone

    from django_advisory_cron.admin.jobs import RegisteredJobAdmin
    from django_advisory_cron.ops.status import job_statuses

    observer = Observer(url)
    try:
        _user, client = hourly_jobs_and_admin(args.jobs)
        anchor = timezone.now()
        day = timezone.localtime(anchor - timedelta(days=2))
        runs = "/admin/django_advisory_cron/jobrun/"
        jobs = "/admin/django_advisory_cron/registeredjob/"
        month = {"started__year": day.year, "started__month": day.month}

        def request(path: str, query: dict[str, Any]) -> Callable[[], None]:
            def get() -> None:
                response = client.get(path, query)
                assert response.status_code == 200, (path, query, response.status_code)

            return get

        def cronstatus() -> None:
            with contextlib.suppress(SystemExit):
                call_command("cronstatus", "--json", stdout=io.StringIO())

        pages: dict[str, tuple[str, dict[str, Any]]] = {
            "admin index (baseline)": ("/admin/", {}),
            "Job runs": (runs, {}),
            "Job runs ?job=": (runs, {"job": "bench.job7"}),
            "Job runs ?status__exact=failed": (runs, {"status__exact": "failed"}),
            "Job runs, a month": (runs, month),
            "Job runs, a day": (runs, {**month, "started__day": day.day}),
            "a run's page": ("", {}),
            "Jobs": (jobs, {}),
            "Jobs, page 2": (jobs, {"p": 2}),
            "Jobs ?q=": (jobs, {"q": "bench.job7"}),
            "Held locks": ("/admin/django_advisory_cron/heldlock/", {}),
            "metrics/": ("/cron/metrics/", {}),
        }
        results: dict[int, dict[str, tuple[float, int]]] = {}
        filled = 0
        open_endpoints = {**settings.ADVISORY_CRON, "ENDPOINT_ACCESS": "open"}
        for step in steps:
            with connection.cursor() as cursor:
                cursor.execute(
                    FILL,
                    {
                        "jobs": args.jobs,
                        "anchor": anchor,
                        "spacing": args.spacing,
                        "first": filled + 1,
                        "last": step,
                    },
                )
                cursor.execute("VACUUM ANALYZE django_advisory_cron_jobrun")
                cursor.execute("SELECT count(*), max(id) FROM django_advisory_cron_jobrun")
                rows, last_id = cursor.fetchone()
            filled = step
            pages["a run's page"] = (f"{runs}{last_id // 2}/change/", {})
            calls = {label: request(path, query) for label, (path, query) in pages.items()}
            calls["cronstatus --json"] = cronstatus
            with override_settings(ADVISORY_CRON=open_endpoints):
                queries = {}
                for label, call in calls.items():
                    with CaptureQueriesContext(connection) as captured:
                        call()
                    queries[label] = len(captured.captured_queries)
                times = interleaved(list(calls.values()), args.repeat)
                server_side = {
                    label: observer.server_cost(call, args.repeat) for label, call in calls.items()
                }
            measured = {
                label: (elapsed, queries[label])
                for label, elapsed in zip(calls, times, strict=True)
            }
            results[rows] = measured
            baseline = measured["admin index (baseline)"][0]
            print(
                f"\nhistory rows: {rows:,}; jobs: {args.jobs}; median of {args.repeat}, "
                "taking turns; queries Django sent; on the server: statements, plan + execute ms"
            )
            for label, (elapsed, sent) in measured.items():
                cost = server_side[label]
                on_server = "" if cost is None else f"  {cost[0]:4.1f} st. {cost[1]:6.1f} ms"
                print(
                    f"{label:<34} {elapsed:9.1f} ms  {elapsed / baseline:7.1f}x index"
                    f"  {sent:3d} queries{on_server}"
                )
            shown = RegisteredJobAdmin.list_per_page
            jobs_of = [item.job for item in job_statuses()]
            (arithmetic,) = interleaved([schedule_arithmetic(jobs_of, shown)], args.repeat)
            whole, cost = measured["Jobs"][0], server_side["Jobs"]
            server_ms = 0.0 if cost is None else cost[1]
            print(
                f"the Jobs page's {whole:.1f} ms: the server {server_ms:.1f} ms, the schedule "
                f"arithmetic {arithmetic:.1f} ms ({len(jobs_of)} last expected ticks, {shown} "
                f"next), the rest (the view, the ORM, rendering) "
                f"{whole - server_ms - arithmetic:.1f} ms"
            )
        first, last = min(results), max(results)
        print(f"\ngrowth from {first:,} to {last:,} rows: ms at each, ratio, ratio of x index")
        index = "admin index (baseline)"
        for label, (elapsed, _queries) in results[last].items():
            before = results[first][label][0]
            relative = (elapsed / results[last][index][0]) / (before / results[first][index][0])
            print(
                f"{label:<34} {before:9.1f} {elapsed:9.1f}  {elapsed / before:6.2f}x"
                f"  {relative:6.2f}x"
            )
    finally:
        observer.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
