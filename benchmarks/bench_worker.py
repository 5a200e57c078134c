"""Tick-start latency of ``cronworker`` and how the wins spread across workers.

Run on demand: ``python benchmarks/bench_worker.py [--jobs 200] [--workers 3] [--seconds 16]``.
Starts a durable throwaway PostgreSQL (or uses DATABASE_URL; ``benchmarks/measure.py``), then
real ``manage.py cronworker`` processes on the test project, with empty jobs on a 5-second
interval. The latency of a run is its row's ``started`` (the database's clock, in the
statement that takes the lock) minus its tick; and, since a run claimed together with others
may wait for a free thread after that, its row's ``finished`` minus its tick too (for an
empty job, an upper bound of when its body began). The baseline, measured in the same run:
one worker with one job.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import Observer
from benchmarks.workers import (
    environment,
    migrated_database,
    percentile,
    start_workers,
    stop_workers,
)


def measure(
    url: str, jobs: int, workers: int, seconds: float
) -> tuple[list[float], list[float], list[int]]:
    """Run the workers; return the latencies to the start and to the end of each run (ms),
    and the runs each worker won."""
    import psycopg

    env = environment(url, jobs, 5)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE django_advisory_cron_jobrun")
        processes = start_workers(env, workers)
        time.sleep(seconds)
        stop_workers(processes)
        rows = conn.execute(
            "SELECT extract(epoch FROM started - tick) * 1000, "
            "extract(epoch FROM finished - tick) * 1000, pid "
            "FROM django_advisory_cron_jobrun WHERE status = 'succeeded'"
        ).fetchall()
    wins = {process.pid: 0 for process in processes}
    for _started, _finished, pid in rows:
        wins[pid] = wins.get(pid, 0) + 1
    started = [float(latency) for latency, _finished, _pid in rows]
    finished = [float(latency) for _started, latency, _pid in rows]
    return started, finished, list(wins.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=16)
    options = parser.parse_args()
    with migrated_database() as (url, _server):
        observer = Observer(url)
        print(observer.header())
        observer.close()
        base, base_end, _wins = measure(url, 1, 1, options.seconds)
        latencies, ends, wins = measure(url, options.jobs, options.workers, options.seconds)
    many = f"{options.workers} workers, {options.jobs} jobs"
    for title, baseline, values in (
        (
            "tick-start latency, ms (tick instant -> run row written, database clock)",
            base,
            latencies,
        ),
        (
            "tick-to-end latency, ms (tick instant -> empty run finished, database clock)",
            base_end,
            ends,
        ),
    ):
        base_p50 = statistics.median(baseline)
        print(title)
        print(f"{'':40} {'runs':>6} {'p50':>8} {'p99':>8} {'max':>8} {'p99 x base p50':>15}")
        for label, row in (("baseline: 1 worker, 1 job", baseline), (many, values)):
            p99 = percentile(row, 0.99)
            print(
                f"{label:40} {len(row):>6} {statistics.median(row):>8.1f} {p99:>8.1f} "
                f"{max(row):>8.1f} {p99 / base_p50:>15.1f}"
            )
        print()
    print(f"runs won per worker: {wins}")


if __name__ == "__main__":
    main()
