"""Jobs for tests/test_worker_edges.py, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "worker_edge_tasks"}'`` in the worker processes."""

import os
import time
from datetime import timedelta

from django_advisory_cron import locked_task
from django_advisory_cron.core.schedule import Schedule

from .models import Marker


@locked_task(name="edge_slow8", every=timedelta(seconds=2))
def edge_slow8() -> None:
    """Runs for 8 s: a "run now" and a SIGTERM arrive while it runs."""
    Marker.objects.create(job="edge_slow8", pid=os.getpid())
    time.sleep(8)
    Marker.objects.create(job="edge_slow8_done", pid=os.getpid())


@locked_task(name="edge_every2", every=timedelta(seconds=2))
def edge_every2() -> None:
    Marker.objects.create(job="edge_every2", pid=os.getpid())


@locked_task(name="edge_never", schedule="0 0 1 1 *")
def edge_never() -> None:
    """Its schedule fails whenever a tick is computed (set below)."""
    Marker.objects.create(job="edge_never", pid=os.getpid())


def _never_fires() -> Schedule:
    """A schedule on 30 February, which never comes: croniter gives up with an error when
    asked for a tick. Built from a valid expression and then changed, so the declaration and
    the system checks (which reject such an expression) still let the job reach the worker:
    the worker must survive what a schedule does at run time."""
    schedule = Schedule("0 0 1 1 *")
    schedule.expression = "0 0 30 2 *"
    return schedule


edge_never.__dict__["schedule"] = _never_fires()
