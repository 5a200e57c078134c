"""Jobs for the monitoring tests (``JOBS_MODULE = "monitoring_tasks"`` in their subprocesses).

``MONITORED_SCHEDULE`` lets a test schedule the Sentry jobs at the current minute, so a run
started now belongs to a tick.
"""

import os
import time

from django_advisory_cron import locked_task

from .models import Marker

SCHEDULE = os.environ.get("MONITORED_SCHEDULE", "0 3 * * *")


@locked_task(name="monitored", schedule=SCHEDULE, max_runtime=90)
def monitored(seconds: str = "0") -> None:
    """Holds its lock a moment, so racing replicas skip."""
    Marker.objects.create(job="monitored", pid=os.getpid())
    time.sleep(float(seconds))


@locked_task(name="monitored_failing", schedule=SCHEDULE)
def monitored_failing() -> None:
    raise RuntimeError("disk full")


@locked_task(name="ping_ok")
def ping_ok() -> None:
    """Succeeds at once."""


@locked_task(name="ping_failing")
def ping_failing() -> None:
    raise RuntimeError("disk full")


@locked_task(name="ping_hang")
def ping_hang() -> None:
    """Succeeds at once; its monitor never answers."""


@locked_task(name="ping_500")
def ping_500() -> None:
    """Succeeds at once; its monitor answers 500."""


@locked_task(name="ping_500_failing")
def ping_500_failing() -> None:
    raise RuntimeError("disk full")
