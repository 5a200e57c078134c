"""System checks for jobs delivered through the Tasks framework (``deliver="tasks..."``).

``E050``: a job has ``deliver`` but no Tasks framework is installed. ``E051``: ``deliver``
names a backend alias that ``TASKS`` does not configure. ``E052``: the backend cannot take the
task (its class cannot be loaded, or it refuses the task, e.g. its ``QUEUES`` lack
``"default"``). ``W053``: the backend never runs what is enqueued (``DummyBackend``).
``W054``: the backend queues nothing and runs each tick inside the scheduler's enqueue
(``ImmediateBackend``, the default without a ``TASKS`` setting).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from ...conf import CHECK_TAG, check_id
from ...jobs.job import registry
from .deliverer import diagnose


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
            messages.append(kind(problem.message, hint=problem.hint, id=check_id(problem.check_id)))
    return messages
