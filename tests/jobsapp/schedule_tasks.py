"""Jobs for the schedules-as-data tests, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "schedule_tasks"}'`` in the worker processes: jobs with
arguments that schedules kept in the database call, and a code job to override."""

import os
import time

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(retries=1, retry_backoff=0.1)
def mark(label: str, note: str = "", seconds: float = 0) -> None:
    """One ``Marker`` row named ``label`` per run; then busy for ``seconds``."""
    Marker.objects.create(job=label, pid=os.getpid(), note=note)
    if seconds:
        time.sleep(seconds)


@locked_task(name="code_yearly", schedule="0 0 1 1 *")
def code_yearly() -> None:
    """Ticks once a year in code: the tests override its schedule from the database."""
    Marker.objects.create(job="code_yearly", pid=os.getpid())
