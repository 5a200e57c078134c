"""The Celery app of the Celery beat baseline (``benchmarks/beat_baseline.py``): one beat
sends ``BEAT_BENCH_JOBS`` entries every ``BEAT_BENCH_EVERY`` seconds, on the clock's
multiples of the interval as this project's ticks are, through Redis to Celery workers whose
task records each run in the benchmark's database: the history this project keeps in its run
table, kept here by the body.

Run by the baseline as ``celery -A benchmarks.beat_app beat|worker``; not a part of the
package.
"""

from __future__ import annotations

import math
import os
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
from celery import Celery
from celery.schedules import schedstate, schedule

EVERY = float(os.environ.get("BEAT_BENCH_EVERY", "10"))
JOBS = int(os.environ.get("BEAT_BENCH_JOBS", "0"))
#: The table the body writes its run to (``beat_baseline.TABLE``).
TABLE = "bench_beat_runs"

app = Celery("beat_bench", broker=os.environ.get("BEAT_BENCH_BROKER", "redis://"))
app.conf.update(
    task_ignore_result=True,
    enable_utc=True,
    timezone="UTC",
    worker_hijack_root_logger=False,
    # Beat looks again at least once a second; it sleeps until the next entry is due anyway.
    beat_max_loop_interval=1,
)


class OnTheInterval(schedule):  # type: ignore[misc]  # Celery ships no types
    """Due on each multiple of the interval since the epoch, as a tick of ``every=`` is here
    (Celery's own ``schedule`` counts from the entry's last run, so its ticks drift)."""

    def is_due(self, last_run_at: datetime) -> schedstate:
        now = time.time()
        tick = math.floor(now / EVERY) * EVERY
        until_next = tick + EVERY - now
        return schedstate(self.maybe_make_aware(last_run_at).timestamp() < tick, until_next)


app.conf.beat_schedule = {
    f"bench_{number}": {
        "task": "beat_bench.body",
        "schedule": OnTheInterval(timedelta(seconds=EVERY)),
        "args": (f"bench_{number}",),
    }
    for number in range(JOBS)
}

_connections = threading.local()


@app.task(name="beat_bench.body")  # type: ignore[untyped-decorator]
def body(job: str) -> None:
    """Record this run: its job, its tick (the interval's multiple it started in) and its start,
    on the database's clock as this project's run rows are."""
    connection: Any = getattr(_connections, "connection", None)
    if connection is None or connection.closed:
        connection = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        _connections.connection = connection
    connection.execute(
        f"INSERT INTO {TABLE} (job, tick, started, status) SELECT %s, "
        "to_timestamp(floor(extract(epoch FROM clock_timestamp()) / %s) * %s), "
        "clock_timestamp(), 'succeeded'",
        (job, EVERY, EVERY),
    )
