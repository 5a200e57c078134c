"""Jobs for the failure notice tests (``JOBS_MODULE = "notice_tasks"`` in their workers).

``notice_flaky`` fails its first ``NOTICE_FAILURES`` (5) runs, counted across every replica by
the rows it writes (runs of one job never overlap), then succeeds.
"""

import os
import time

from django_advisory_cron import locked_task

from .models import Marker

FAILURES = int(os.environ.get("NOTICE_FAILURES", "5"))


@locked_task(name="notice_flaky", every=1)
def notice_flaky() -> None:
    Marker.objects.create(job="notice_flaky", pid=os.getpid())
    if Marker.objects.filter(job="notice_flaky").count() <= FAILURES:
        raise RuntimeError("disk full")


@locked_task(name="notice_slow", timeout=0.5)
def notice_slow() -> None:
    """Always runs past its timeout: ``runlocked`` stops it and records it timed out."""
    time.sleep(30)
