"""Cron for Django's Tasks framework: each tick of a ``deliver="tasks"`` job is enqueued once,
and runs once, through any ``django.tasks`` backend.

The schedulers (``cronworker`` replicas, ``runlocked --enqueue``) claim a tick before they
enqueue it, so one task is enqueued per tick; the task (``task.run_tick``) runs the job under
its lock for that tick, so a duplicate delivery finds the tick taken and skips.

* ``framework`` — ``django.tasks`` (Django 6.0+) or the ``django-tasks`` backport (5.2);
* ``task`` — the one task registered with the framework;
* ``deliverer`` — the claim and the enqueue, and ``enqueue()`` for code;
* ``checks`` — ``E050`` to ``W054``;
* ``links`` — the admin's link from a run to its task result.

[install][django_advisory_cron.contrib.tasks.install] is called by the app's ``ready()``: it
registers the deliverer with [delivery][django_advisory_cron.delivery.targets] (the layer the
scheduler asks) and the checks; it imports no Tasks framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...delivery import targets
from ...jobs.job import Job
from .deliverer import CLAIM_KEEP_DAYS, TasksDeliverer
from .links import ResultLinks, task_link

__all__ = ["CLAIM_KEEP_DAYS", "TasksDeliverer", "enqueue", "install", "task_link"]


def install() -> None:
    """Make ``deliver="tasks..."`` jobs go through the Tasks framework, and check them."""
    from .checks import register_checks

    targets.register(
        targets.Target(
            "tasks", "backend alias", TasksDeliverer(), default=True, links=ResultLinks()
        )
    )
    register_checks()


def enqueue(
    job: Job[..., Any], *args: Any, tick: datetime | None = None, using: str | None = None
) -> targets.Delivery:
    """Enqueue ``job`` (with JSON-serialisable ``args``) to its Tasks backend for ``tick``, or
    for the tick nearest the database's clock; once per tick across every caller.

    Raises [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] for arguments that
    are not JSON-serialisable, an unknown backend, or a backend that refuses the task.
    """
    sent: Sequence[Any] = args
    return TasksDeliverer().deliver(job, tick, args=sent, using=using)
