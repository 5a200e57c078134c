"""How the "Held locks" admin page scales: 5,000 advisory locks held from a few connections.

Run on demand: ``python benchmarks/bench_held_locks.py [--locks N] [--connections C]``. Uses
DATABASE_URL or starts a throwaway PostgreSQL. Prints the time and query count of whole admin
requests (rendering included) next to baselines measured in the same run: a bare
``SELECT ... FROM pg_locks`` of every advisory lock, and what Django's stock changelist would
spend on the same rows (a COUNT query plus a page query).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import setup
from benchmarks.timing import median_ms

NAMESPACE = int.from_bytes(b"cron", "big", signed=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locks", type=int, default=5000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=50, help="registered jobs (CASE size)")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    server, url = setup()
    import psycopg
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models import Count, Window
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from django_advisory_cron import locked_task
    from django_advisory_cron.ops.heldlocks import held_locks

    try:
        jobs = []
        for number in range(args.jobs):
            jobs.append(
                locked_task(name=f"bench.job{number}", max_runtime=60 + number)(lambda: None)
            )
        holders = [psycopg.connect(url, autocommit=True) for _ in range(args.connections)]
        per_connection = args.locks // args.connections
        for index, holder in enumerate(holders):
            first = index * per_connection
            # Our namespace, some of them registered jobs' keys, the rest unknown objids.
            holder.execute(
                "SELECT pg_advisory_lock(%s, g) FROM generate_series(%s::int, %s::int) AS g",
                [NAMESPACE, first, first + per_connection - 1 - 5],
            )
            holder.execute(
                "SELECT pg_advisory_lock(g) FROM generate_series(%s::bigint, %s::bigint) AS g",
                [10**12 + first, 10**12 + first + 4],
            )
        for job, holder in zip(jobs, holders * args.jobs, strict=False):
            holder.execute(f"SELECT pg_advisory_lock({job.key.sql})", job.key.params)
        total = held_locks().count()

        user = get_user_model().objects.create_superuser("bench", password="bench")
        client = Client()
        client.force_login(user)
        base = "/admin/django_advisory_cron/heldlock/"

        def bare() -> None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pid, granted, mode, classid, objid, objsubid FROM pg_locks "
                    "WHERE locktype = 'advisory'"
                )
                cursor.fetchall()

        def stock() -> None:
            queryset = held_locks().order_by("-stale", "-held_for", "pid")
            queryset.count()
            list(queryset[:100])

        def ours() -> None:
            queryset = held_locks().order_by("-stale", "-held_for", "pid")
            list(queryset.annotate(total_rows=Window(Count("*")))[:100])

        baseline = median_ms(bare, args.repeat)
        stock_ms = median_ms(stock, args.repeat)
        ours_ms = median_ms(ours, args.repeat)
        print(f"advisory locks held: {total} from {args.connections} connections")
        print(f"registered jobs: {len(jobs)}; {args.repeat} requests each, median")
        print(f"baseline  bare SELECT of every advisory lock in pg_locks: {baseline:8.2f} ms")
        print(
            f"stock-changelist equivalent (COUNT + page of 100):      {stock_ms:8.2f} ms"
            f"  ({stock_ms / baseline:5.1f}x baseline, 2 queries)"
        )
        print(
            f"this app's page query (rows + count(*) OVER ()):       {ours_ms:8.2f} ms"
            f"  ({ours_ms / baseline:5.1f}x baseline, 1 query)"
        )
        pages = {
            "Held locks, page 1 (100 rows)": {},
            "Held locks, last page": {"p": str((total + 99) // 100)},
            "Held locks, ?stale=yes": {"stale": "yes"},
            "Held locks, ?ours=yes&q=bench.job7": {"ours": "yes", "q": "bench.job7"},
            "Held locks, sorted by job name": {"o": "5"},
            "Jobs page": None,
        }
        for label, params in pages.items():
            url_path = "/admin/django_advisory_cron/registeredjob/" if params is None else base
            query = params or {}
            response = client.get(url_path, query)
            assert response.status_code == 200, (label, response.status_code)
            with CaptureQueriesContext(connection) as captured:
                client.get(url_path, query)
            # Read now: every request start clears the connection's query log.
            everything = list(captured.captured_queries)
            app = [
                q
                for q in everything
                if 'FROM "django_session"' not in q["sql"] and 'FROM "auth_' not in q["sql"]
            ]
            size = max(len(q["sql"]) for q in app)
            elapsed = median_ms(lambda: client.get(url_path, query), args.repeat)  # noqa: B023
            print(
                f"{label:<38} {elapsed:8.2f} ms  ({elapsed / baseline:5.1f}x baseline)  "
                f"queries: {len(app)} (+{len(everything) - len(app)} session/auth), "
                f"largest SQL {size / 1024:.1f} KiB"
            )
        for holder in holders:
            holder.close()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
