"""What the worker benchmarks share: the test project's ``manage.py``, the environment of a
``cronworker`` over the empty benchmark jobs, a migrated database, and percentiles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.measure import database
from django_advisory_cron.testing import PostgresServer

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "tests" / "manage.py"


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
    env: dict[str, str], count: int, grace: float = 10
) -> list[subprocess.Popen[bytes]]:
    """``count`` real ``manage.py cronworker`` processes with ``env``, their output discarded."""
    return [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "cronworker", "--grace", f"{grace:g}"],
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


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
