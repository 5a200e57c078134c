"""What a run costs as the run history grows: the same calls on an empty run table and on one
that holds a long history, in the same run.

Run on demand: ``python benchmarks/bench_history.py [--rows 1000000] [--jobs 4]
[--interrupted 7] [--runs 200]``. Uses DATABASE_URL or starts a durable throwaway PostgreSQL
(``benchmarks/measure.py``). Each row is a kind of ``Job.run()`` (session scope): a job with
an interval schedule, a run now of a job without one, an at-most-once job. Each is timed
``--runs`` times on the empty table (medians), then the table is filled with ``--rows`` past
rows spread over ``--jobs`` jobs (the measured ones among them), one in ``--interrupted`` of
them interrupted and the rest succeeded, failed or skipped, and analysed, and each is timed
again; the ratio is the second median over the first. A claim whose cost followed the
history (a plan compiled by the server's JIT on every call once its estimate passed
``jit_above_cost``, an at-most-once check that read every interrupted row) shows here as a
ratio far above 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import setup
from benchmarks.measure import fill_history

#: The statuses of the history's rows, in turn, before one in ``--interrupted`` is made
#: interrupted.
STATUSES = ["succeeded", "succeeded", "succeeded", "failed", "skipped_locked", "skipped_tick"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of history")
    parser.add_argument("--jobs", type=int, default=4, help="jobs the history is spread over")
    parser.add_argument(
        "--interrupted", type=int, default=7, help="one row in this many is interrupted"
    )
    parser.add_argument("--runs", type=int, default=200, help="timed calls per row and table")
    options = parser.parse_args()
    if options.jobs < 3:
        parser.error("--jobs must be at least 3: the history covers the measured jobs")
    server, url = setup()
    try:
        empty, full = measure(url, options)
    finally:
        if server is not None:
            server.stop()
    print(
        f"{options.rows:,} rows over {options.jobs} jobs, 1 in {options.interrupted} "
        f"interrupted; {options.runs} calls per row, medians"
    )
    print(f"{'call':38} {'empty ms':>9} {'history ms':>11} {'ratio':>7}")
    for label in empty:
        print(
            f"{label:38} {empty[label]:9.2f} {full[label]:11.2f} {full[label] / empty[label]:7.2f}"
        )


def measure(url: str, options: argparse.Namespace) -> tuple[dict[str, float], dict[str, float]]:
    """The medians of each call on the empty table, then with the history."""
    import psycopg

    from django_advisory_cron import locked_task

    every = timedelta(seconds=1)
    plain = locked_task(name="history_0", scope="session", every=every)(lambda: None)
    manual = locked_task(name="history_1", scope="session")(lambda: None)
    once = locked_task(name="history_2", scope="session", every=every, at_most_once=True)(
        lambda: None
    )
    # Ticks far from the history's (a tick runs once: each call takes the next second).
    start = datetime.now(timezone.utc) + timedelta(days=365)
    seconds = iter(range(10**9))

    def scheduled(job: Any) -> Callable[[], None]:
        def call() -> None:
            assert job.run(now=start + timedelta(seconds=next(seconds))).ran

        return call

    calls: dict[str, Callable[[], object]] = {
        "a scheduled job's run": scheduled(plain),
        "a run now (no tick)": lambda: manual.run(),
        "an at-most-once job's run": scheduled(once),
    }
    empty = timed(calls, options.runs)
    with psycopg.connect(url, autocommit=True) as conn:
        fill_history(
            conn,
            prefix="history_",
            jobs=options.jobs,
            rows=options.rows,
            every=3600,
            statuses=STATUSES,
            interrupted=options.interrupted,
        )
    return empty, timed(calls, options.runs)


def timed(calls: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median milliseconds of each call, after a few warm-up calls."""
    medians = {}
    for label, call in calls.items():
        for _ in range(5):
            call()
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            call()
            samples.append(time.perf_counter() - started)
        medians[label] = statistics.median(samples) * 1000
    return medians


if __name__ == "__main__":
    main()
