"""Run scheduled Django jobs once across many replicas, with PostgreSQL advisory locks.

The public names below are loaded on first use (PEP 562), so importing one module of the
package (``django_advisory_cron.conf``, say, from a settings file) loads only what that module
needs, and never the models before the app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .exceptions import (
        AdvisoryCronError,
        DatabaseUnavailable,
        InvalidSchedule,
        JobTimedOut,
        LockDatabaseError,
        LockLost,
        LockNotAcquired,
        LockScopeError,
        UnknownJob,
    )
    from .jobs import SKIPPED, Job, locked_task, registry
    from .keys import LockKey, job_key
    from .locks import AdvisoryLock, advisory_lock
    from .schedule import Schedule
    from .worker import Worker, start_worker

_WHERE = {
    "AdvisoryCronError": "exceptions",
    "DatabaseUnavailable": "exceptions",
    "InvalidSchedule": "exceptions",
    "JobTimedOut": "exceptions",
    "LockDatabaseError": "exceptions",
    "LockLost": "exceptions",
    "LockNotAcquired": "exceptions",
    "LockScopeError": "exceptions",
    "UnknownJob": "exceptions",
    "SKIPPED": "jobs",
    "Job": "jobs",
    "locked_task": "jobs",
    "registry": "jobs",
    "LockKey": "keys",
    "job_key": "keys",
    "AdvisoryLock": "locks",
    "advisory_lock": "locks",
    "Schedule": "schedule",
    "Worker": "worker",
    "start_worker": "worker",
}

__all__ = [
    "SKIPPED",
    "AdvisoryCronError",
    "AdvisoryLock",
    "DatabaseUnavailable",
    "InvalidSchedule",
    "Job",
    "JobTimedOut",
    "LockDatabaseError",
    "LockKey",
    "LockLost",
    "LockNotAcquired",
    "LockScopeError",
    "Schedule",
    "UnknownJob",
    "Worker",
    "advisory_lock",
    "job_key",
    "locked_task",
    "registry",
    "start_worker",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("django-advisory-cron")
    except PackageNotFoundError:  # pragma: no cover - imported from a source tree, not installed
        return "0+unknown"


#: The installed distribution's version (``pyproject.toml``'s ``version``).
__version__ = _version()


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
