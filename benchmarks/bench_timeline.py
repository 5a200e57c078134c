"""Whether the Timeline page stays within its budget as the run history grows: 200 jobs over a
day, its own work in at most 3 statements (besides Django's session and user), its time set by
the window shown, not by the history.

Run on demand: ``python benchmarks/bench_timeline.py [--jobs N] [--steps 100000,1000000]``.
Uses DATABASE_URL or starts a durable throwaway PostgreSQL with ``pg_stat_statements``.
Registers ``--jobs`` hourly jobs (each at its own minute) and fills their history to each step
in turn, older rows added below the newer ones (one ``INSERT ... SELECT generate_series`` per
step, ``VACUUM ANALYZE`` after each): one row per job and hour, so the day the page shows holds
the same 3,600 past runs (the 18 hours before now, 200 jobs) at every step, and 1,000,000 rows
go back 208 days. The mix: 80 % succeeded, 5 % failed (half of them after a retry), 2.5 % each
timed out and interrupted, 7.5 % skips, 2.5 % manual runs.

At each step it times the whole request through Django's test client (rendering included: 3,600
runs and 1,200 coming ticks drawn), as a superuser, the default window (a day, now at three
quarters), median of ``--repeat`` taking turns with the admin index (the baseline), and counts
the statements the server ran (``pg_stat_statements``) for one request and for the page's own
work (the same view without the session and user look-ups), and the server's milliseconds
planning and executing the timeline's statement. It prints each, and the growth from the first
step to the last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import hourly_jobs_and_admin, setup
from benchmarks.measure import Observer, interleaved

FILL = """
INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, status,
                                         error, manual, attempts)
SELECT 'bench.job' || j, CASE WHEN k = 39 THEN NULL ELSE at END,
       'web-' || (g %% 3), g %% 30000, at + interval '2 seconds',
       at + make_interval(secs => 3 + g %% 7 * 60),
       CASE WHEN k < 32 OR k = 39 THEN 'succeeded' WHEN k < 34 THEN 'failed'
            WHEN k = 34 THEN 'timed_out' WHEN k = 35 THEN 'interrupted'
            WHEN k < 38 THEN 'skipped_locked' ELSE 'skipped_tick' END,
       '', k = 39, CASE WHEN k = 33 THEN 2 ELSE 1 END
FROM (SELECT g, g %% %(jobs)s AS j, (g / %(jobs)s) %% 40 AS k,
             %(anchor)s::timestamptz - make_interval(hours => (g / %(jobs)s)::int)
                 + make_interval(mins => (g %% %(jobs)s %% 60)::int) AS at
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS rows
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--steps", default="100000,1000000", help="history sizes, ascending")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    steps = [int(step) for step in args.steps.split(",")]

    server, url = setup()
    from django.contrib import admin
    from django.db import connection
    from django.test import RequestFactory

    from django_advisory_cron.admin.timeline import TimelineAdmin
    from django_advisory_cron.db.execute import database_now
    from django_advisory_cron.models import Timeline

    observer = Observer(url)
    try:
        user, client = hourly_jobs_and_admin(args.jobs)
        timeline_url = "/admin/django_advisory_cron/timeline/"
        anchor = database_now().replace(minute=0, second=0, microsecond=0)
        page_admin = TimelineAdmin(Timeline, admin.site)
        factory = RequestFactory()

        def index() -> None:
            assert client.get("/admin/").status_code == 200

        def timeline() -> None:
            response = client.get(timeline_url)
            assert (
                response.status_code == 200
                and f"bench.job{args.jobs - 1}".encode() in response.content
            )

        def view_alone() -> None:
            """The page's own work: the view, its user already known (no session, no user
            look-up), rendered."""
            request: Any = factory.get(timeline_url)
            request.user = user
            request._messages = []
            response: Any = page_admin.changelist_view(request)
            response.render()  # a TemplateResponse, rendered as the handler would

        results: dict[int, dict[str, float]] = {}
        filled = 0
        for step in steps:
            with connection.cursor() as cursor:
                cursor.execute(
                    FILL, {"jobs": args.jobs, "anchor": anchor, "first": filled + 1, "last": step}
                )
                cursor.execute("VACUUM ANALYZE django_advisory_cron_jobrun")
                cursor.execute("SELECT count(*) FROM django_advisory_cron_jobrun")
                (rows,) = cursor.fetchone()
            filled = step
            request_statements = observer.per_call(timeline, 3)
            page_statements = observer.per_call(view_alone, 3)
            observer.reset()
            index_ms, timeline_ms = interleaved([index, timeline], args.repeat)
            timed = observer.statement_time(["-- name: timeline_runs", "WITH w AS"])
            server_ms = (timed[1] + timed[2]) / timed[0] if timed and timed[0] else float("nan")
            results[rows] = {
                "index": index_ms,
                "timeline": timeline_ms,
                "request statements": request_statements,
                "page statements": page_statements,
                "server ms": server_ms,
            }
            print(
                f"\nhistory rows: {rows:,}; jobs: {args.jobs}; median of {args.repeat}, "
                "taking turns"
            )
            print(f"{'admin index (baseline)':<34} {index_ms:8.1f} ms")
            ratio = timeline_ms / index_ms
            print(f"{'Timeline, 1 day':<34} {timeline_ms:8.1f} ms  {ratio:6.1f}x index")
            print(
                f"{'statements (server): request':<34} {request_statements:8.1f}"
                f"  (the view alone: {page_statements:.1f})"
            )
            print(f"{'timeline_runs on the server':<34} {server_ms:8.2f} ms (planning + executing)")
        first, last = min(results), max(results)
        print(f"\ngrowth from {first:,} to {last:,} rows: at each, ratio, ratio of x index")
        before, after = results[first], results[last]
        relative = (after["timeline"] / after["index"]) / (before["timeline"] / before["index"])
        print(
            f"{'Timeline, 1 day':<34} {before['timeline']:8.1f} {after['timeline']:8.1f} ms"
            f"  {after['timeline'] / before['timeline']:5.2f}x  {relative:5.2f}x"
        )
        print(
            f"{'timeline_runs on the server':<34} {before['server ms']:8.2f} "
            f"{after['server ms']:8.2f} ms  {after['server ms'] / before['server ms']:5.2f}x"
        )
    finally:
        observer.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
