"""Jobs for the ``cronjob backfill`` tests (tests/test_backfill.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "backfill_tasks"}'``: each body writes a marker."""

import os
import time
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(schedule="0 * * * *")
def backfill_hourly() -> None:
    Marker.objects.create(job="backfill_hourly", pid=os.getpid())


@locked_task(every=timedelta(seconds=1))
def backfill_every_second() -> None:
    """Long enough that two backfills and a worker meet on the lock."""
    Marker.objects.create(job="backfill_every_second", pid=os.getpid())
    time.sleep(0.1)


@locked_task(schedule="0 * * * *")
def backfill_failing() -> None:
    raise RuntimeError("the report server said no")


@locked_task(schedule="0 * * * *")
def backfill_slow() -> None:
    Marker.objects.create(job="backfill_slow", pid=os.getpid())
    time.sleep(60)


@locked_task()
def backfill_unscheduled() -> None:
    """Runs only when asked."""
