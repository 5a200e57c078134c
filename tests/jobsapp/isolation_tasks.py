"""Jobs for the cronworker isolation tests, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "isolation_tasks", ...}'`` in the worker processes (and
in the child processes the workers start, which inherit the environment)."""

import os
import signal
import time
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(every=timedelta(seconds=3), timeout=1)
def sleeps_past_timeout() -> None:
    """Sleeps far past its one-second timeout: stopped by its own alarm each tick."""
    Marker.objects.create(job="sleeps_past_timeout", pid=os.getpid())
    time.sleep(30)


@locked_task(every=timedelta(seconds=2), timeout=1, scope="session")
def ignores_timeout() -> None:
    """Ignores the alarm and SIGTERM (a body stuck where no signal handler runs): only
    SIGKILL stops it."""
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Marker.objects.create(job="ignores_timeout", pid=os.getpid())
    time.sleep(60)


@locked_task(every=timedelta(seconds=2))
def records_its_pid() -> None:
    Marker.objects.create(job="records_its_pid", pid=os.getpid())


@locked_task(every=timedelta(seconds=1))
def three_seconds_every_second() -> None:
    """Runs three times longer than its interval: the ticks in between are skipped."""
    Marker.objects.create(job="three_seconds_every_second", pid=os.getpid())
    time.sleep(3)


@locked_task(every=timedelta(seconds=2))
def sleeps_a_minute() -> None:
    """Still running when the worker is stopped."""
    Marker.objects.create(job="sleeps_a_minute", pid=os.getpid())
    time.sleep(60)


@locked_task(timeout=1, scope="transaction")
def times_out_in_transaction() -> None:
    """Writes, then sleeps past its timeout: the write rolls back, the timed-out row stays."""
    Marker.objects.create(job="times_out_in_transaction", pid=os.getpid())
    time.sleep(30)
