"""Celery beat as the baseline of ``bench_scale.py --beat``: the same number of jobs on the same
interval, one beat process (the leader this project does without) sending them through a
real Redis (Debian's ``redis-server``) to as many Celery workers as the cronworker replicas it
is measured against, each with as many threads as a cronworker runs jobs at once. Each run's
body writes a row (job, tick, start) to the benchmark's database: the history this project
keeps, so both sides pay for one.

What differs, and is said beside the figures: a beat run's start is its body's (the task has
reached a worker thread), a cronworker run's is its row's, written when the tick is claimed,
before the body's thread picks it up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.beat_app import TABLE
from benchmarks.workers import ROOT, stop_workers
from tests.celery_servers import redis_server

#: A cronworker's default ``--max-concurrency``: each Celery worker gets as many threads.
THREADS = 32


def prepare(conn: Any) -> None:
    """The baseline's run table, empty."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} "
        "(job text NOT NULL, tick timestamptz NOT NULL, started timestamptz NOT NULL, "
        "status text NOT NULL)"
    )
    conn.execute(f"TRUNCATE {TABLE}")


@contextmanager
def beat_fleet(url: str, workers: int, jobs: int, every: float) -> Iterator[Callable[[], None]]:
    """Redis, ``workers`` Celery workers and one beat over ``jobs`` jobs every ``every``
    seconds; gives what stops them (warm shutdown, as SIGTERM asks), which the block's end
    does too."""
    with (
        redis_server() as redis,
        tempfile.TemporaryDirectory(prefix="advisory-cron-beat-") as directory,
    ):
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "BEAT_BENCH_BROKER": redis.url,
            "BEAT_BENCH_JOBS": str(jobs),
            "BEAT_BENCH_EVERY": f"{every:g}",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)

        def celery(*command: str) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "benchmarks.beat_app",
                    *command,
                    "--loglevel",
                    "WARNING",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        processes = [
            celery(
                "worker",
                *("--pool", "threads", "--concurrency", str(THREADS)),
                *("--without-heartbeat", "--without-gossip", "--without-mingle"),
                *("--hostname", f"bench{number}@%h"),
            )
            for number in range(workers)
        ]
        processes.append(celery("beat", "--schedule", str(Path(directory) / "beat-schedule")))
        try:
            yield lambda: stop_workers(processes)
        finally:
            stop_workers(processes)
