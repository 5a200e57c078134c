"""What one ``cronworker`` costs while it waits: connections, statements per minute, memory.

Run on demand: ``python benchmarks/bench_worker_at_rest.py [--jobs 200] [--seconds 60]``.
Starts a throwaway PostgreSQL (or uses DATABASE_URL; then nothing else should use that
database meanwhile), then one real ``manage.py cronworker`` process, twice: with jobs whose
next tick is hours away (at rest), and with 10 jobs on a 5-second interval (busy). Statements
are the server's committed transactions in the database (each of our statements runs in its
own), minus this script's own; the baseline, measured in the same run, is the same window with
no worker at all.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workers import environment, migrated_database, start_workers

#: The server publishes an idle backend's counters at least this often (PostgreSQL 15+).
STATS_DELAY = 11.0


def commits(conn: Any) -> int:
    row = conn.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0])


def backends(conn: Any) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def window(url: str, seconds: float, env: dict[str, str] | None) -> tuple[float, int, float]:
    """Statements per minute, connections and RSS (MiB) of one worker (or none) over a window."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        worker = None
        if env is not None:
            (worker,) = start_workers(env, 1, grace=5)
            time.sleep(5)  # start-up: Django, the first clock reading
        time.sleep(STATS_DELAY)
        first = commits(conn)
        time.sleep(seconds)
        held = backends(conn)
        rss = rss_mib(worker.pid) if worker is not None else 0.0
        time.sleep(STATS_DELAY)
        last = commits(conn)
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    own = 3  # this script's commits between the two readings (backends, the last reading)
    return (last - first - own) * 60 / (seconds + STATS_DELAY), held, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200, help="jobs of the idle worker")
    parser.add_argument("--seconds", type=float, default=60)
    options = parser.parse_args()
    with migrated_database() as (url, _server):
        rows = [
            ("baseline: no worker", window(url, options.seconds, None)),
            (
                f"at rest: {options.jobs} daily jobs",
                window(url, options.seconds, environment(url, options.jobs, 86400)),
            ),
            ("busy: 10 jobs every 5 s", window(url, options.seconds, environment(url, 10, 5))),
        ]
    base = rows[0][1][0]
    print(f"one cronworker over {options.seconds:g} s (statements: minus the baseline)")
    print(f"{'':32} {'statements/min':>15} {'connections':>12} {'RSS MiB':>8}")
    for label, (per_minute, held, rss) in rows:
        print(f"{label:32} {per_minute - base:>15.1f} {held:>12} {rss:>8.1f}")


if __name__ == "__main__":
    main()
