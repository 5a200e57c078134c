"""Schedule registered jobs through django-q2, once per tick across every cluster.

Every job with a ``schedule`` gets one django-q2 ``Schedule`` of CRON type, named
``advisory_cron:<job>``, that calls ``run_scheduled()`` with the job's name. django-q2 passes
the time it *meant* to run the schedule through the row's ``intended_date_kwarg``, so every
delivery of one tick claims the same ``(job, tick)`` record, and each delivery after the first
skips.

* ``delivery`` — ``run_scheduled()``, the function django-q2 calls;
* ``schedules`` — ``sync()`` of the ``Schedule`` rows, and the ``post_migrate`` hook;
* ``checks`` — the ``Q_CLUSTER`` and "schedules in sync" system checks.

Which ticks a late delivery runs (the job's ``catch_up``, else ``CATCH_UP``) is decided by the
core module [catchup][django_advisory_cron.jobs.catchup]. The names below are re-exported here
because synced rows store ``django_advisory_cron.contrib.django_q.run_scheduled`` as their
``func``, and because this package was one module before. Needs the ``[q2]`` extra
(``django-q2`` with ``croniter``).
"""

from __future__ import annotations

try:
    import django_q  # noqa: F401  (only to fail early with a clear message)
except ImportError as error:  # pragma: no cover - exercised in a subprocess without django_q
    raise ImportError(
        "django_advisory_cron.contrib.django_q needs django-q2: "
        "pip install 'django-advisory-cron[q2]' and add 'django_q' to INSTALLED_APPS"
    ) from error

from ...conf import CATCH_UP_CHOICES
from ...db.execute import database_now
from ...jobs.catchup import MAX_CATCH_UP, plan
from .checks import check_q_cluster, check_schedules_synced, register_checks
from .delivery import INTENDED_KWARG, RUNNER, run_scheduled
from .schedules import (
    NAME_MAX_LENGTH,
    PREFIX,
    SYNC_LOCK,
    SYNC_LOCK_WAIT,
    Action,
    Change,
    ours,
    out_of_date,
    schedule_name,
    scheduled_jobs,
    sync,
    sync_after_migrate,
    tally,
)

__all__ = [
    "CATCH_UP_CHOICES",
    "INTENDED_KWARG",
    "MAX_CATCH_UP",
    "NAME_MAX_LENGTH",
    "PREFIX",
    "RUNNER",
    "SYNC_LOCK",
    "SYNC_LOCK_WAIT",
    "Action",
    "Change",
    "check_q_cluster",
    "check_schedules_synced",
    "database_now",
    "ours",
    "out_of_date",
    "plan",
    "register_checks",
    "run_scheduled",
    "schedule_name",
    "scheduled_jobs",
    "sync",
    "sync_after_migrate",
    "tally",
]
