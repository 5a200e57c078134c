"""Jobs for ``benchmarks/bench_worker.py``: ``BENCH_WORKER_JOBS`` jobs (default 200) on a
``BENCH_WORKER_EVERY``-second interval (default 5) with empty bodies, of the lock scope
``BENCH_WORKER_SCOPE`` (default ``auto``)."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task
from django_advisory_cron.core.scopes import check_scope


def _register(number: int, every: float) -> None:
    def body() -> None:
        return None

    scope = check_scope(os.environ.get("BENCH_WORKER_SCOPE", "auto"))
    locked_task(name=f"bench_{number}", every=timedelta(seconds=every), scope=scope)(body)


for _number in range(int(os.environ.get("BENCH_WORKER_JOBS", "200"))):
    _register(_number, float(os.environ.get("BENCH_WORKER_EVERY", "5")))
