"""W015: a job captures a logger that the project's logging configuration disabled, so its
runs can keep nothing of it (``@locked_task(capture=...)``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from ..conf import app_settings, check_id
from ..jobs.job import registry
from ..run.output import uncapturable


def check_captured_loggers(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W015: what a job captures that cannot be captured, said before its first run."""
    warnings: list[checks.CheckMessage] = []
    for job in registry.all():
        for name in job.capture or ():
            why = uncapturable(name, app_settings.CAPTURE_LEVEL)
            if why is not None:
                warnings.append(
                    checks.Warning(
                        f"Job {job.name!r} cannot capture what it asks for: {why}, so its "
                        "runs keep nothing of that logger.",
                        hint=f"Name {name!r} under LOGGING['loggers'], or set "
                        "LOGGING['disable_existing_loggers'] to False.",
                        id=check_id("W015"),
                    )
                )
    return warnings
