"""The one task this app registers with the Tasks framework: run a job for a tick.

Its path, ``django_advisory_cron.contrib.tasks.task.run_tick``, is stored in every enqueued
task and must never change. The ``Task`` object is built on first use (by a scheduler
enqueueing, or by a task worker importing that path), not when this module is imported: the
framework validates a task against a backend when it is created, and a project's ``TASKS`` may
have no ``"default"`` backend.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from django.utils import timezone

from ...jobs import catalog
from ...models import RunStatus
from ...run.runner import execute
from .framework import framework

#: The dotted path task workers import; stored in every enqueued task.
TASK_PATH = "django_advisory_cron.contrib.tasks.task.run_tick"


def _run_tick(context: Any, job_name: str, at: str, args: list[Any]) -> dict[str, Any]:
    """Run ``job_name`` under its lock for the time ``at`` (ISO 8601: the tick it was
    enqueued for), recording this task's result id on the run row.

    A tick delivered twice (two schedulers, a retry, a redelivery) runs once: the second
    delivery finds the tick taken and skips. A job failure is recorded as a failed
    run and re-raised, so the backend marks the task failed too; a retry of it then finds the
    tick taken and skips. What the job's code raised that is not an ``Exception``
    (``SystemExit``, ``KeyboardInterrupt``) is re-raised as a ``JobFailed`` chained to it, so
    the task worker does not take it for a stop of its own.
    """
    # UnknownJob: neither registered in this worker process nor a schedule of the database.
    job = catalog.find(job_name)
    moment = datetime.fromisoformat(at)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    result = execute(job, args=tuple(args), now=moment, task_id=str(context.task_result.id))
    result.reraise_in_task()
    return {
        "job": job.name,
        "tick": result.tick.isoformat() if result.tick else None,
        "status": RunStatus(result.status).value,
        "run_id": result.run_id,
    }


# The task worker finds the task by its function's module and qualified name: the name under
# which ``__getattr__`` below returns the ``Task``.
_run_tick.__name__ = _run_tick.__qualname__ = TASK_PATH.rpartition(".")[2]


@functools.cache
def tick_task() -> Any:
    """The ``Task`` object (built once per process).

    It is created for the ``"default"`` backend when there is one, else the first configured
    one; every enqueue picks its real backend with ``.using(backend=...)``.
    """
    tasks = framework()
    aliases = list(tasks.task_backends.settings)
    alias = (
        tasks.DEFAULT_TASK_BACKEND_ALIAS
        if tasks.DEFAULT_TASK_BACKEND_ALIAS in aliases
        else aliases[0]
    )
    return tasks.task(_run_tick, takes_context=True, backend=alias)


def __getattr__(name: str) -> Any:
    if name == _run_tick.__name__:
        return tick_task()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
