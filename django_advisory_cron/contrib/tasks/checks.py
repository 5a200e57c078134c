"""System checks for jobs delivered through the Tasks framework (``deliver="tasks..."``).

``E050``: a job has ``deliver`` but no Tasks framework is installed. ``E051``: ``deliver``
names a backend alias that ``TASKS`` does not configure. ``E052``: the backend cannot take the
task (its class cannot be loaded, or it refuses the task, e.g. its ``QUEUES`` lack
``"default"``). ``W053``: the backend never runs what is enqueued (``DummyBackend``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core import checks

from ...conf import APP_LABEL, CHECK_TAG
from ...delivery import DeliverableJob, DeliveryError
from ...jobs import registry
from .deliverer import backend_alias, task_for
from .framework import NOT_INSTALLED, errors, framework, installed

APP = APP_LABEL


@dataclass(frozen=True)
class Problem:
    """One reason a job's ticks cannot be delivered (``is_error``) or will not run."""

    check_id: str
    message: str
    hint: str
    is_error: bool = True


def diagnose(job: DeliverableJob) -> list[Problem]:
    """What stands in the way of delivering ``job``'s ticks through the Tasks framework."""
    if not job.deliver:
        return []
    if not installed():
        return [
            Problem(
                "E050",
                f"Job {job.name!r} has deliver={job.deliver!r}, but {NOT_INSTALLED}.",
                "Install a Tasks framework, or remove deliver= to run the job's ticks in place.",
            )
        ]
    tasks = framework()
    alias = backend_alias(job)
    if alias not in tasks.task_backends.settings:
        configured = ", ".join(map(repr, tasks.task_backends.settings)) or "none"
        return [
            Problem(
                "E051",
                f"Job {job.name!r} has deliver={job.deliver!r}, but TASKS has no backend "
                f"{alias!r} (configured: {configured}).",
                "Add the backend to TASKS, or name a configured one in deliver='tasks:<alias>'.",
            )
        ]
    try:
        backend = tasks.task_backends[alias]
        task_for(job)
    except (DeliveryError, *errors()) as error:
        return [
            Problem(
                "E052",
                f"Job {job.name!r}: the Tasks backend {alias!r} cannot enqueue its ticks: "
                f"{str(error).strip().splitlines()[0]}",
                "Fix the backend in TASKS (its BACKEND path, its QUEUES must include "
                "'default'), or deliver to another backend.",
            )
        ]
    if type(backend).__name__ == "DummyBackend":
        return [
            Problem(
                "W053",
                f"Job {job.name!r} is delivered to the Tasks backend {alias!r}, a "
                "DummyBackend: its ticks are enqueued and never run.",
                "Deliver to a backend with workers (e.g. django-tasks-db's DatabaseBackend).",
                is_error=False,
            )
        ]
    return []


def register_checks() -> None:
    """Register the Tasks delivery check (from ``install()``, at app start-up)."""
    checks.register(check_deliveries, CHECK_TAG)


def check_deliveries(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """One message per job whose ``deliver`` cannot work (or will not run its ticks)."""
    messages: list[checks.CheckMessage] = []
    for job in registry.all():
        for problem in diagnose(job):
            kind = checks.Error if problem.is_error else checks.Warning
            messages.append(
                kind(problem.message, hint=problem.hint, id=f"{APP}.{problem.check_id}")
            )
    return messages
