"""Jobs for the cronworker tests, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "worker_tasks", ...}'`` in the worker processes."""

import os
import time
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker

#: How many two-second jobs the worker tests run.
JOBS = 20


def _every_two_seconds(number: int) -> None:
    name = f"every2_{number}"

    def body() -> None:
        Marker.objects.create(job=name, pid=os.getpid())

    locked_task(name=name, every=timedelta(seconds=2))(body)


for _number in range(JOBS):
    _every_two_seconds(_number)


@locked_task(name="every2_slow", every=timedelta(seconds=2))
def every2_slow() -> None:
    """Runs far longer than its interval: the worker must be stopped while it runs."""
    Marker.objects.create(job="every2_slow", pid=os.getpid())
    time.sleep(60)


@locked_task(name="every2_work", every=timedelta(seconds=2))
def every2_work() -> None:
    """Busy for most of its interval, so that a worker can be killed in the middle of it."""
    Marker.objects.create(job="every2_work", pid=os.getpid())
    time.sleep(1.5)


@locked_task(name="yearly_manual", schedule="0 0 1 1 *")
def yearly_manual() -> None:
    """Ticks once a year: in the tests it runs only when someone asks for it ("run now")."""
    Marker.objects.create(job="yearly_manual", pid=os.getpid())


@locked_task(name="yearly_busy", schedule="0 0 1 1 *")
def yearly_busy() -> None:
    """Run now only, busy for 3 s: a worker's one slot stays taken meanwhile."""
    Marker.objects.create(job="yearly_busy", pid=os.getpid())
    time.sleep(3)
