"""What reading the jobs costs when the database holds many schedules.

Run on demand: ``python benchmarks/bench_catalog.py [--schedules 200] [--repeat 50]``. Uses
DATABASE_URL or starts a durable throwaway PostgreSQL. Every path that runs or shows jobs
(``runlocked``, ``cronjob``, ``cronstatus``, ``health/``, the metrics, the admin) reads them
through the catalog; this fills the schedules table with command schedules (half cron, half
interval; a command schedule's check builds the command's parser) and prints the median time
of:

- the baseline: the statement that reads the schedules, alone, on the same connection;
- a read when nothing changed since the last one (the common case: schedules change rarely);
- building the catalog from the rows again, what a read costs right after a change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import setup
from benchmarks.timing import median_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    server, _url = setup()
    from django.db import connection

    from django_advisory_cron.db import sql
    from django_advisory_cron.db.execute import fetch_all
    from django_advisory_cron.jobs import catalog
    from django_advisory_cron.models import Schedule

    try:
        Schedule.objects.bulk_create(
            Schedule(name=f"bench_cmd_{n}", command="sendtestemail", args=["--admins"], every=3600)
            if n % 2
            else Schedule(name=f"bench_cmd_{n}", command="clearsessions", cron="0 3 * * *")
            for n in range(args.schedules)
        )
        statement = sql.schedule_rows()
        read = catalog.current()
        assert len(read.jobs) == args.schedules and not read.broken, read.broken

        baseline = median_ms(lambda: fetch_all(connection, statement), args.repeat)
        unchanged = median_ms(catalog.current, args.repeat)
        rebuilt = median_ms(lambda: catalog.build(read.definitions, read.version), args.repeat)
        print(f"{args.schedules} command schedules, median of {args.repeat} calls")
        for label, ms in (
            ("the schedules statement alone", baseline),
            ("a read, nothing changed", unchanged),
            ("a read right after a change (build)", rebuilt),
        ):
            print(f"  {label:<38} {ms:8.2f} ms  {ms / baseline:6.2f}")
    finally:
        Schedule.objects.filter(name__startswith="bench_cmd_").delete()
        connection.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
