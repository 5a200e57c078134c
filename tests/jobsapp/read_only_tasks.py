"""Jobs for the read-only database tests, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE":
"read_only_tasks"}'``."""

import os
import time

from django.db import connection, transaction

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(name="ro_tick", every=1)
def ro_tick() -> None:
    Marker.objects.create(job="ro_tick", pid=os.getpid())


@locked_task(name="ro_body")
def ro_body() -> None:
    """Writes in a transaction it made read-only itself: the job's own failure."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
        Marker.objects.create(job="ro_body", pid=os.getpid())


@locked_task(name="ro_hold")
def ro_hold() -> None:
    """Marks its start, then reads until the test writes a ``go`` marker (reads go on in a
    read-only database): the test switches the server read-only meanwhile."""
    Marker.objects.create(job="ro_hold", pid=os.getpid())
    while not Marker.objects.filter(job="ro_hold", note="go").exists():
        time.sleep(0.05)


@locked_task(name="ro_hold_every", every=2)
def ro_hold_every() -> None:
    """``ro_hold`` on a schedule, for ``cronworker``."""
    Marker.objects.create(job="ro_hold_every", pid=os.getpid())
    while not Marker.objects.filter(job="ro_hold_every", note="go").exists():
        time.sleep(0.05)
