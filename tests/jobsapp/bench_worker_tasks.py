"""Jobs for ``benchmarks/bench_worker.py``: ``BENCH_WORKER_JOBS`` jobs (default 200) on a
``BENCH_WORKER_EVERY``-second interval (default 5) with empty bodies, of the lock scope
``BENCH_WORKER_SCOPE`` (default ``auto``). Where ``BENCH_WORKER_STARTS`` names a directory,
each body appends its job's name and the moment it started (``time.time()``) to a file there,
one per process: ``bench_scale.py`` reads the tick-to-body latency from them. Where
``BENCH_WORKER_SLEEP`` gives seconds, each body then sleeps that long, so that the runs of a
tick end well after its claims."""

import os
import time
from datetime import timedelta
from pathlib import Path

from django_advisory_cron import locked_task
from django_advisory_cron.core.scopes import check_scope

STARTS = os.environ.get("BENCH_WORKER_STARTS")
SLEEP = float(os.environ.get("BENCH_WORKER_SLEEP", "0"))


def _register(number: int, every: float) -> None:
    name = f"bench_{number}"

    def body() -> None:
        if STARTS:
            started = time.time()
            with (Path(STARTS) / str(os.getpid())).open("a") as starts:
                starts.write(f"{name} {started:.6f}\n")
        if SLEEP:
            time.sleep(SLEEP)

    scope = check_scope(os.environ.get("BENCH_WORKER_SCOPE", "auto"))
    locked_task(name=name, every=timedelta(seconds=every), scope=scope)(body)


for _number in range(int(os.environ.get("BENCH_WORKER_JOBS", "200"))):
    _register(_number, float(os.environ.get("BENCH_WORKER_EVERY", "5")))
