"""Celery as a delivery target: each tick of a ``deliver="celery"`` job is sent to Celery
once, from whichever scheduler (``cronworker`` replica, ``runlocked --enqueue``) wins the
tick, as the Celery task its schedule names, so every replica runs ``cronworker`` and celery
beat is retired.

* ``app`` — the project's Celery app (``ADVISORY_CRON["CELERY_APP"]``, else the one loaded);
* ``deliverer`` — the bounded send, and the run history's record of it;
* ``checks`` — ``E070`` and ``E071``.

[install][django_advisory_cron.contrib.celery.install] is called by the app's ``ready()``: it
registers the deliverer with [delivery][django_advisory_cron.delivery.targets] and the checks; it
imports no Celery. A task reads the tick it was sent for with
[tick_of][django_advisory_cron.contrib.celery.tick_of].
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...delivery import targets
from .deliverer import BY_NAME, JOB_HEADER, TICK_HEADER, CeleryDeliverer

__all__ = ["JOB_HEADER", "TICK_HEADER", "CeleryDeliverer", "install", "tick_of"]


def install() -> None:
    """Make ``deliver="celery..."`` jobs go through Celery, and check them."""
    from .checks import register_checks

    targets.register(targets.Target("celery", "queue", CeleryDeliverer(), by_name=BY_NAME))
    register_checks()


def tick_of(request: Any) -> datetime | None:
    """The tick a Celery task was sent for, from its ``request`` (``self.request`` in a
    ``bind=True`` task); ``None`` for a message this app did not send."""
    value = getattr(request, TICK_HEADER, None) or (getattr(request, "headers", None) or {}).get(
        TICK_HEADER
    )
    return datetime.fromisoformat(value) if isinstance(value, str) else None
