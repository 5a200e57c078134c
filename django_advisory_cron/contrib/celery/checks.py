"""System checks for jobs sent to Celery (``deliver="celery..."``): ``E070``, Celery is not
installed; ``E071``, no Celery app is found (none loaded, several, or
``ADVISORY_CRON["CELERY_APP"]`` names nothing importable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from ...conf import CHECK_TAG, check_id
from ...delivery.targets import parse
from ...jobs.job import registry
from .deliverer import diagnose


def register_checks() -> None:
    """Register the Celery delivery check (from ``install()``, at app start-up)."""
    checks.register(check_celery_deliveries, CHECK_TAG)


def check_celery_deliveries(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """One error per job sent to Celery whose ticks cannot be sent here."""
    return [
        checks.Error(problem.message, hint=problem.hint, id=check_id(problem.check_id))
        for job in registry.all()
        if job.deliver and parse(job.deliver)[0] == "celery"
        for problem in diagnose(job)
    ]
