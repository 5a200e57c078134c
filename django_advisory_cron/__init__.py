"""Run scheduled Django jobs once across many replicas, with PostgreSQL advisory locks."""

from .exceptions import (
    AdvisoryCronError,
    DatabaseUnavailable,
    InvalidSchedule,
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

__all__ = [
    "SKIPPED",
    "AdvisoryCronError",
    "AdvisoryLock",
    "DatabaseUnavailable",
    "InvalidSchedule",
    "Job",
    "LockDatabaseError",
    "LockKey",
    "LockLost",
    "LockNotAcquired",
    "LockScopeError",
    "Schedule",
    "UnknownJob",
    "advisory_lock",
    "job_key",
    "locked_task",
    "registry",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("django-advisory-cron")
    except PackageNotFoundError:  # pragma: no cover - imported from a source tree, not installed
        return "0+unknown"


#: The installed distribution's version (``pyproject.toml``'s ``version``).
__version__ = _version()
