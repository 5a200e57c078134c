"""Jobs delivered through the Tasks framework, for the Tasks delivery tests; loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "tasks_delivery"}'`` and ``tests.settings_tasks``."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(name="tasks_every2", every=timedelta(seconds=2), deliver="tasks")
def tasks_every2() -> None:
    """Enqueued to the database backend at every tick; a db_worker runs it."""
    Marker.objects.create(job="tasks_every2", pid=os.getpid())


@locked_task(name="tasks_failing", every=timedelta(seconds=2), deliver="tasks")
def tasks_failing() -> None:
    """Fails in the task worker, so the task fails too and its retry must not run it again."""
    Marker.objects.create(job="tasks_failing", pid=os.getpid())
    raise RuntimeError("tasks_failing fails on purpose")


@locked_task(name="tasks_minutely", every=timedelta(minutes=1), deliver="tasks:immediate")
def tasks_minutely() -> None:
    """Enqueued by ``runlocked --enqueue`` to the ImmediateBackend: runs inside the enqueue."""
    Marker.objects.create(job="tasks_minutely", pid=os.getpid())


@locked_task(name="tasks_async", every=timedelta(seconds=2), deliver="tasks")
async def tasks_async() -> None:
    """An ``async def`` job delivered to the database backend: the task worker awaits it, and
    it writes through the async ORM."""
    await Marker.objects.acreate(job="tasks_async", pid=os.getpid())


@locked_task(name="tasks_async_minutely", every=timedelta(minutes=1), deliver="tasks:immediate")
async def tasks_async_minutely() -> None:
    """An ``async def`` job enqueued by ``runlocked --enqueue`` to the ImmediateBackend."""
    await Marker.objects.acreate(job="tasks_async_minutely", pid=os.getpid())
