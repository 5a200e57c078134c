"""How soon running ``cronworker`` processes honour a schedule added in the database.

Run on demand: ``python benchmarks/bench_schedule_changes.py [--workers 3] [--changes 10]
[--pgbouncer]``. Starts a durable throwaway PostgreSQL (or uses DATABASE_URL), then real
``manage.py cronworker`` processes at rest (one daily job in code). Each change inserts a
schedule calling that job every second, as the admin and ``cronjob add`` do, and waits for
its first run; the schedule is then removed. Reported, from the ``changed`` stamp the
database put on the row:

- to the first run's start: what a user sees (it includes the wait for the first tick, at
  most a second away);
- from the first tick to that start: how late the tick ran; a worker that had not seen the
  change by the tick runs it late, as a missed tick.

The baseline, measured in the same run with the same workers, is a "run now" request of the
code job (``cronjob trigger``), which the workers hear the same way (``LISTEN``). With
``--pgbouncer`` the workers connect through a PgBouncer in transaction mode, where they
cannot LISTEN and look for changes every ``SCHEDULE_POLL`` seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workers import (
    environment,
    migrated_database,
    percentile,
    start_workers,
    stop_workers,
)
from django_advisory_cron.testing import find_pgbouncer, start_pgbouncer

INSERT = """
INSERT INTO django_advisory_cron_schedule
    (name, override, job, command, args, kwargs, cron, every, timezone, enabled, catch_up,
     deliver, description, changed_by)
VALUES (%s, false, 'bench_0', '', '[]', '{}', '', 1, '', true, '', '', '', 'benchmark')
RETURNING changed"""

FIRST_RUN = """
SELECT tick, started FROM django_advisory_cron_jobrun
 WHERE job = %s AND tick IS NOT NULL ORDER BY tick LIMIT 1"""

REQUEST = """
INSERT INTO django_advisory_cron_jobstate (job, paused, paused_by, reason, run_requested,
                                           run_requested_by, changed)
VALUES ('bench_0', false, '', '', clock_timestamp(), 'benchmark', now())
ON CONFLICT (job) DO UPDATE SET run_requested = EXCLUDED.run_requested
RETURNING run_requested"""

MANUAL_RUN = """
SELECT started FROM django_advisory_cron_jobrun
 WHERE job = 'bench_0' AND manual AND started >= %s ORDER BY started LIMIT 1"""


def poll(observer: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> Any:
    """The first row of ``sql`` once there is one (30 s at most)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = observer.execute(sql, params).fetchone()
        if row is not None:
            return row
        time.sleep(0.005)
    raise SystemExit(f"nothing after 30 s: {sql.split()[0:6]} {params}")


def change_latencies(observer: psycopg.Connection[Any], changes: int) -> tuple[list[float], ...]:
    to_start, late = [], []
    for number in range(changes):
        name = f"bench_change_{number}"
        (changed,) = observer.execute(INSERT, (name,)).fetchone()  # type: ignore[misc]
        tick, started = poll(observer, FIRST_RUN, (name,))
        to_start.append((started - changed).total_seconds())
        late.append((started - tick).total_seconds())
        observer.execute("DELETE FROM django_advisory_cron_schedule WHERE name = %s", (name,))
        time.sleep(0.5)
    return to_start, late


def request_latencies(observer: psycopg.Connection[Any], requests: int) -> list[float]:
    latencies = []
    for _ in range(requests):
        (requested,) = observer.execute(REQUEST).fetchone()  # type: ignore[misc]
        observer.execute("NOTIFY django_advisory_cron_run, 'bench_0'")
        (started,) = poll(observer, MANUAL_RUN, (requested,))
        latencies.append((started - requested).total_seconds())
        time.sleep(0.5)
    return latencies


def line(label: str, values: list[float], baseline: float) -> str:
    p50 = statistics.median(values)
    return (
        f"{label:44} p50 {p50 * 1000:8.1f} ms  p90 {percentile(values, 0.9) * 1000:8.1f} ms  "
        f"max {max(values) * 1000:8.1f} ms  {p50 / baseline:6.2f} x baseline"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--pgbouncer", action="store_true", help="workers behind PgBouncer")
    options = parser.parse_args()
    with ExitStack() as stack:
        url, server = stack.enter_context(migrated_database())
        worker_url = url
        if options.pgbouncer:
            if find_pgbouncer() is None or server is None:
                raise SystemExit("--pgbouncer needs the pgbouncer binary and no DATABASE_URL")
            bouncer = stack.enter_context(start_pgbouncer(server, pool_mode="transaction"))
            worker_url = bouncer.url(str(psycopg.conninfo.conninfo_to_dict(url)["dbname"]))
        env = environment(worker_url, 1, 86400, max_skew=0.4)
        workers = start_workers(env, options.workers)
        observer = psycopg.connect(url, autocommit=True)
        time.sleep(6)  # start-up: Django, the first plan, LISTEN
        baseline = request_latencies(observer, options.changes)
        to_start, late = change_latencies(observer, options.changes)
        stop_workers(workers)
        observer.close()
    where = "behind PgBouncer (transaction mode)" if options.pgbouncer else "direct connection"
    print(f"{options.workers} cronworker(s) at rest, {where}, {options.changes} changes")
    base = statistics.median(baseline)
    print(line("baseline: run-now request -> its run starts", baseline, base))
    print(line("schedule added -> its first run starts", to_start, base))
    print(line("its first tick -> that run starts", late, base))


if __name__ == "__main__":
    main()
