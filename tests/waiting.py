"""Polling helpers for tests that watch other processes (workers, replicas, the server)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from django_advisory_cron.worker.fleet import PRESENCE_NAME

#: What every claim statement holds (db/queries.sql, ``claim_runs`` and its census variant):
#: what ``pg_stat_activity`` shows of it, a call of the function whose statement tries the
#: locks.
CLAIM = "django_advisory_cron_claim("


def wait_for(predicate: Callable[..., Any], timeout: float = 30, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test
    when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(interval)
    return value


def presence_pids(observer: Any) -> set[int]:
    """The server pids of the open ``cronworker`` presence connections."""
    rows = observer.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
        (f"{PRESENCE_NAME}%",),
    ).fetchall()
    return {pid for (pid,) in rows}


def workers_present(observer: Any) -> int:
    """How many ``cronworker`` processes have their presence connection open."""
    return len(presence_pids(observer))


def wait_for_workers(observer: Any, workers: list[Any], timeout: float = 30) -> None:
    """Until every one of ``workers`` (``cronworker`` processes) has its presence connection
    open, so is past installing its SIGTERM handler: one stopped while Django still starts dies
    of the signal (-15) instead of exiting 143 as told. A worker that exits fails the test with
    its output."""

    def ready() -> bool:
        for worker in workers:
            if worker.poll() is not None:
                out, err = worker.communicate()
                pytest.fail(f"cronworker exited {worker.returncode}:\n{out}\n{err}")
        # By pid: behind a transaction pooler a stopped worker's server connection keeps its
        # application_name until the pooler closes it.
        names = [f"{PRESENCE_NAME} %:{worker.pid}" for worker in workers]
        row = observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ANY(%s)", (names,)
        ).fetchone()
        return int(row[0]) == len(workers)

    wait_for(ready, timeout)
