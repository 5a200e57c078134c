"""Run scheduled Django jobs once across many replicas, with PostgreSQL advisory locks.

The public names below are loaded on first use (PEP 562), so importing one module of the
package (``django_advisory_cron.conf``, say, from a settings file) loads only what that module
needs, and never the models before the app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.keys import LockKey, job_key
    from .core.schedule import Schedule
    from .db.connections import close_lock_connections
    from .exceptions import (
        AdvisoryCronError,
        DatabaseUnavailable,
        InvalidSchedule,
        JobTimedOut,
        LockDatabaseError,
        LockLost,
        LockNotAcquired,
        LockScopeError,
        RunCancelled,
        UnknownJob,
    )
    from .jobs.job import SKIPPED, Job, locked_task, registry
    from .lock.advisory import AdvisoryLock, advisory_lock
    from .ops import control
    from .ops.heldlocks import held_locks
    from .ops.metrics import RunHistoryCollector
    from .ops.monitoring import Reporter
    from .run.runner import RunResult
    from .worker.loop import Worker, start_worker

_WHERE = {
    "AdvisoryCronError": "exceptions",
    "DatabaseUnavailable": "exceptions",
    "InvalidSchedule": "exceptions",
    "JobTimedOut": "exceptions",
    "LockDatabaseError": "exceptions",
    "LockLost": "exceptions",
    "LockNotAcquired": "exceptions",
    "LockScopeError": "exceptions",
    "RunCancelled": "exceptions",
    "UnknownJob": "exceptions",
    "SKIPPED": "jobs.job",
    "Job": "jobs.job",
    "locked_task": "jobs.job",
    "registry": "jobs.job",
    "LockKey": "core.keys",
    "job_key": "core.keys",
    "AdvisoryLock": "lock.advisory",
    "advisory_lock": "lock.advisory",
    "Schedule": "core.schedule",
    "Worker": "worker.loop",
    "start_worker": "worker.loop",
    "RunResult": "run.runner",
    "control": "ops",
    "RunHistoryCollector": "ops.metrics",
    "Reporter": "ops.monitoring",
    "held_locks": "ops.heldlocks",
    "close_lock_connections": "db.connections",
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
    "Reporter",
    "RunCancelled",
    "RunHistoryCollector",
    "RunResult",
    "Schedule",
    "UnknownJob",
    "Worker",
    "advisory_lock",
    "close_lock_connections",
    "control",
    "held_locks",
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
    loaded = importlib.import_module(f".{module}", __name__)
    # A name that is a module of the package (``control``) is imported, not looked up.
    if not hasattr(loaded, name):
        importlib.import_module(f".{module}.{name}", __name__)
    value = getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
