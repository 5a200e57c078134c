"""Jobs for the failover tests: ``FAILOVER_JOBS`` short jobs on a ``FAILOVER_EVERY``-second
interval (defaults 20 and 2) and ``failover_long``, whose body queries the database every
0.1 s for up to ``FAILOVER_LONG`` seconds (default 60): a run in flight when the primary fails."""

import os
import time
from datetime import timedelta

from django.db import connection

from django_advisory_cron import locked_task

EVERY = timedelta(seconds=float(os.environ.get("FAILOVER_EVERY", "2")))


def _register(number: int) -> None:
    def body() -> None:
        return None

    locked_task(name=f"failover_{number}", every=EVERY)(body)


for _number in range(int(os.environ.get("FAILOVER_JOBS", "20"))):
    _register(_number)


@locked_task(name="failover_long", every=EVERY)
def failover_long() -> None:
    ends = time.monotonic() + float(os.environ.get("FAILOVER_LONG", "60"))
    while time.monotonic() < ends:
        time.sleep(0.1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")


@locked_task(name="failover_gate")
def failover_gate() -> None:
    """Runs until the file named by ``FAILOVER_GATE`` exists: a test opens the gate when it
    has seen what it waits for during the run."""
    gate = os.environ["FAILOVER_GATE"]
    ends = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < ends:
        time.sleep(0.05)
