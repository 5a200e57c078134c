"""Polling helpers for tests that watch other processes (workers, replicas, the server)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django_advisory_cron.worker.fleet import PRESENCE_NAME


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
