"""Jobs delivered through the Tasks framework's immediate backend (the default when a project
has no ``TASKS`` setting): the task runs inside the enqueue, in the scheduler itself. Loaded
with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "immediate_tasks"}'`` and ``tests.settings``."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task

from .models import Marker


@locked_task(name="immediate_every2", every=timedelta(seconds=2), deliver="tasks")
def immediate_every2() -> None:
    Marker.objects.create(job="immediate_every2", pid=os.getpid())


@locked_task(name="immediate_raises", every=timedelta(seconds=2), deliver="tasks")
def immediate_raises() -> None:
    """Raises ``KeyboardInterrupt`` itself, inside the scheduler's enqueue: a failed run."""
    Marker.objects.create(job="immediate_raises", pid=os.getpid())
    raise KeyboardInterrupt
