"""What the worker benchmarks share: the test project's ``manage.py``, the environment of a
``cronworker`` over the empty benchmark jobs, a migrated database, starting and stopping
workers, the wait until they all claim, the runs of the ticks inside a window, percentiles and
ratios."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import sql

from benchmarks.measure import database
from django_advisory_cron.testing import PostgresServer

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "tests" / "manage.py"
#: The statuses of a run that ran (the other rows are skips, or runs interrupted at a stop).
RAN = ("succeeded", "failed", "lock_lost", "timed_out")


def environment(url: str, jobs: int, every: float, max_skew: float = 1) -> dict[str, str]:
    """A ``tests/manage.py`` process's environment with ``jobs`` empty jobs every ``every``
    seconds (``tests/jobsapp/bench_worker_tasks.py``)."""
    settings = {"JOBS_MODULE": "bench_worker_tasks", "MAX_SKEW": max_skew}
    env = {**os.environ, "DATABASE_URL": url, "ADVISORY_CRON_JSON": json.dumps(settings)}
    env.update(BENCH_WORKER_JOBS=str(jobs), BENCH_WORKER_EVERY=f"{every:g}", PYTHONUNBUFFERED="1")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


@contextmanager
def migrated_database() -> Iterator[tuple[str, PostgresServer | None]]:
    """``(url, server)``: DATABASE_URL, or a durable throwaway server (stopped afterwards),
    migrated."""
    with database() as (url, server):
        subprocess.run(
            [sys.executable, str(MANAGE), "migrate", "-v0"],
            env=environment(url, 0, 5),
            check=True,
        )
        yield url, server


def start_workers(
    env: dict[str, str], count: int, grace: float = 10, options: Sequence[str] = ()
) -> list[subprocess.Popen[bytes]]:
    """``count`` real ``manage.py cronworker`` processes with ``env`` (and ``options``, such as
    another ``--settings``), their output discarded."""
    return [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "cronworker", "--grace", f"{grace:g}", *options],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def stop_workers(processes: list[subprocess.Popen[bytes]], timeout: float = 120) -> None:
    """SIGTERM every worker, then wait for each to exit."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(timeout)


def wait_for_claims(conn: Any, workers: int, rows: int, *, up: float, after: float) -> None:
    """Wait until ``workers`` cronworkers are up (each is visible through its presence
    connection; ``up`` seconds at the most), then until ``rows`` runs are recorded (``after``
    seconds more at the most). Measured from there, start-up costs stay out of the figures,
    and each worker's first claim has made the plan the server keeps for its later ones."""
    deadline = time.monotonic() + up
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
            "'django-advisory-cron worker%%'"
        ).fetchone()
        if row and row[0] >= workers:
            break
        time.sleep(0.1)
    wait_for_rows(conn, rows, deadline + after - time.monotonic())


def wait_for_rows(
    conn: Any, rows: int, timeout: float, table: str = "django_advisory_cron_jobrun"
) -> None:
    """Wait until ``table`` holds ``rows`` rows, ``timeout`` seconds at the most."""
    count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(count).fetchone()
        if row and row[0] >= rows:
            return
        time.sleep(0.1)


@dataclass
class Ticks:
    """The runs of the ticks wholly inside a window, of ``entries`` entries each (see
    ``ticks_in``)."""

    ticks: int
    #: Runs per (entry, tick): exactly one each when ``min`` and ``max`` are 1.
    runs_min: int
    runs_max: int
    #: Entries with no run in a tick.
    missed: int
    #: Milliseconds from a tick to its run's ``started`` (database clock).
    p50: float
    p99: float
    #: History rows (runs and skips), and runs, per tick.
    rows_per_tick: float
    runs_per_tick: float


def ticks_in(
    conn: Any,
    start: datetime,
    end: datetime,
    every: float,
    entries: int,
    table: str = "django_advisory_cron_jobrun",
) -> Ticks:
    """The runs of the ticks wholly inside the window from ``start`` to ``end`` (after it
    began, and early enough to have finished), of ``entries`` entries (a job, or a job in a
    schema) every ``every`` seconds; read from this project's run table, or from ``table``
    with the same four columns (the Celery beat baseline's)."""
    query = sql.SQL(
        "SELECT job, tick, count(*) FILTER (WHERE status = ANY(%s)), "
        "array_agg(extract(epoch FROM started - tick) * 1000) FILTER (WHERE status = ANY(%s)), "
        "count(*) FROM {} "
        "WHERE tick > %s AND tick <= %s - make_interval(secs => %s) GROUP BY job, tick"
    ).format(sql.Identifier(table))
    rows = conn.execute(query, (list(RAN), list(RAN), start, end, every)).fetchall()
    ticks = len({tick for _job, tick, *_rest in rows}) or 1
    runs = [int(ran) for _job, _tick, ran, *_rest in rows]
    expected = ticks * entries
    delays = [float(value) for *_rest, values, _rows in rows for value in (values or [])]
    return Ticks(
        ticks=ticks,
        runs_min=min(runs, default=0) if len(runs) == expected else 0,
        runs_max=max(runs, default=0),
        missed=expected - sum(1 for ran in runs if ran),
        p50=statistics.median(delays) if delays else float("nan"),
        p99=percentile(delays, 0.99),
        rows_per_tick=sum(int(written) for *_rest, written in rows) / ticks,
        runs_per_tick=sum(runs) / ticks,
    )


def ratio(base: float | None, other: float | None) -> str:
    """``other`` as a multiple of ``base``, printed (``n/a`` where either is missing)."""
    if base is None or other is None or not base:
        return "n/a"
    return f"{other / base:.2f}x"


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
