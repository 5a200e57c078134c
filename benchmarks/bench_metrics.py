"""What a Prometheus scrape and a health probe cost: 200 jobs over 1,000,000 history rows.

Run on demand: ``python benchmarks/bench_metrics.py [--jobs N] [--rows N] [--days D]``. Uses
DATABASE_URL or starts a throwaway PostgreSQL. The history is spread evenly over ``--days``
days, two rows in three are the skips of losing replicas, one run in 25 failed. Prints the
median time and the query count of a whole ``metrics/`` and ``health/`` request (through
Django's test client, rendering included), the history statement alone (without and with
every job's lateness target, whose last run with a tick it then reads too), and
``job_statuses`` (both queries plus the schedule arithmetic), next to baselines measured in
the same run:
``SELECT count(*)`` of the history, and the ``GROUP BY job, status`` over the whole history
that a collector counting every run ever recorded would send.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import setup
from benchmarks.timing import median_ms

FILL = """
INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, status, error)
SELECT 'bench.job' || (g %% %(jobs)s), date_trunc('minute', at), 'web-' || (g %% 3), g %% 30000,
       at, at + interval '2 seconds',
       CASE WHEN g %% 3 = 1 THEN 'skipped_locked' WHEN g %% 3 = 2 THEN 'skipped_tick'
            WHEN (g / %(jobs)s) %% 25 = 0 THEN 'failed' ELSE 'succeeded' END,
       CASE WHEN g %% 3 = 0 AND (g / %(jobs)s) %% 25 = 0 THEN 'RuntimeError: disk full'
            ELSE '' END
FROM (SELECT g, now() - make_interval(secs => g * %(spacing)s) AS at
      FROM generate_series(1, %(rows)s) AS g) AS rows
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=90)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    server, _url = setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings
    from django.utils import timezone

    from django_advisory_cron import locked_task
    from django_advisory_cron.core.statuses import SKIPS
    from django_advisory_cron.db import reads
    from django_advisory_cron.ops.status import LATENESS_BUCKETS, job_statuses

    try:
        for number in range(args.jobs):
            locked_task(
                name=f"bench.job{number}", schedule=f"{number % 60} * * * *", late_after=60
            )(lambda: None)
        spacing = args.days * 86400 / args.rows
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE django_advisory_cron_jobrun")
            cursor.execute(FILL, {"jobs": args.jobs, "rows": args.rows, "spacing": spacing})
            cursor.execute("ANALYZE django_advisory_cron_jobrun")
            cursor.execute("SELECT count(*) FROM django_advisory_cron_jobrun")
            (rows,) = cursor.fetchone()

        def query(statement: str) -> Callable[[], None]:
            def run() -> None:
                with connection.cursor() as cursor:
                    cursor.execute(statement)
                    cursor.fetchall()

            return run

        count_ms = median_ms(query("SELECT count(*) FROM django_advisory_cron_jobrun"), args.repeat)
        grouped_ms = median_ms(
            query("SELECT job, status, count(*) FROM django_advisory_cron_jobrun GROUP BY 1, 2"),
            args.repeat,
        )
        window = settings.ADVISORY_CRON.get("METRICS_WINDOW", 86400)
        names = sorted(f"bench.job{number}" for number in range(args.jobs))

        def statement(targets: list[str]) -> None:
            since = timezone.now() - timedelta(seconds=window)
            text, params = reads.job_summaries(
                names,
                skips=list(SKIPS),
                since=since,
                late_bounds=list(LATENESS_BUCKETS),
                targets=targets,
            )
            with connection.cursor() as cursor:
                cursor.execute(text, params)
                cursor.fetchall()

        statement_ms = median_ms(lambda: statement([]), args.repeat)
        targets_ms = median_ms(lambda: statement(names), args.repeat)
        statuses_ms = median_ms(lambda: job_statuses(window=window), args.repeat)
        print(f"history rows: {rows:,}; jobs: {args.jobs}; spread over {args.days:g} days")
        print(f"{args.repeat} requests each, median; METRICS_WINDOW {window} s")
        print(f"baseline  SELECT count(*) of the history:          {count_ms:8.2f} ms")
        print(f"baseline  GROUP BY job, status over the history:   {grouped_ms:8.2f} ms")
        print(f"the history statement alone (database time):     {statement_ms:8.2f} ms")
        print(f"  the same, every job with a lateness target:    {targets_ms:8.2f} ms")
        print(f"job_statuses(window=...), both queries + Python: {statuses_ms:8.2f} ms")
        client = Client()
        with override_settings(ADVISORY_CRON={**settings.ADVISORY_CRON, "ENDPOINT_ACCESS": "open"}):
            for label, path in (("metrics/", "/cron/metrics/"), ("health/", "/cron/health/")):
                response = client.get(path)
                assert response.status_code in (200, 503), (label, response.status_code)
                with CaptureQueriesContext(connection) as captured:
                    client.get(path)
                queries = len(captured.captured_queries)
                elapsed = median_ms(lambda: client.get(path), args.repeat)  # noqa: B023
                print(
                    f"{label:<10} {elapsed:8.2f} ms  ({elapsed / count_ms:5.2f}x count(*)), "
                    f"{queries} queries, {len(response.content):,} bytes"
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
