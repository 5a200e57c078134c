"""Every error this app raises, under one base class: ``except AdvisoryCronError`` catches them.

``JobTimedOut`` alone is a ``BaseException``: it stops a run, as ``KeyboardInterrupt`` does.
"""

from __future__ import annotations

from django.core.management.base import CommandError


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its class name when it has none): what a one-line
    report shows."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class AdvisoryCronError(Exception):
    """Base class for this app's errors."""


class InvalidSchedule(AdvisoryCronError, ValueError):
    """A cron expression that cannot be parsed."""


class LockNotAcquired(AdvisoryCronError):
    """Another process holds the job's lock (raised when ``on_locked="raise"``)."""


class LockScopeError(AdvisoryCronError):
    """A lock scope cannot be used here (e.g. transaction scope inside ``atomic()``)."""


class LockDatabaseError(AdvisoryCronError):
    """The lock database alias is not usable for advisory locks (not PostgreSQL)."""


class DatabaseUnavailable(AdvisoryCronError):
    """The lock database could not be reached, or did not answer in time."""


class LockLost(AdvisoryCronError):
    """The lock's connection died, or its backend no longer holds the lock, while a job ran.

    Raised in the job's thread at its next database query (and, under ``runlocked``, at once),
    so that a run that can no longer prove it is alone stops.
    """


class JobTimedOut(BaseException):
    """Raised in the thread of a job that ran past its ``timeout``, so the run unwinds,
    records ``timed_out`` (its tick stays taken) and releases its lock.

    A ``BaseException``, like ``KeyboardInterrupt``: it stops a run, and a job's
    ``except Exception`` must not swallow it. Raised only in a process that runs one job in
    its main thread (``runlocked``, and the processes ``cronworker`` starts).
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(f"stopped after its timeout of {timeout:g} s")
        self.timeout = timeout


class UnknownJob(AdvisoryCronError, LookupError):
    """No registered job (or management command) has this name."""


class ProbeError(AdvisoryCronError):
    """A pooling probe step failed (connection refused, query error, ...)."""


class ProbeTimeout(ProbeError):
    """A pooling probe step did not finish before its client-side deadline."""


class CommandFailed(AdvisoryCronError, CommandError):
    """A management command of this app failed: a ``CommandError`` with its exit status.

    Django prints the message and exits with ``returncode``; ``except AdvisoryCronError`` and
    ``except CommandError`` both catch it.
    """

    def __init__(self, message: str, returncode: int = 1) -> None:
        super().__init__(message, returncode=returncode)


class ScheduleSyncTimeout(AdvisoryCronError, TimeoutError):
    """Another process held the django-q2 schedule sync lock for too long."""
