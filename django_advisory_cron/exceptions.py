"""Exceptions of the public API."""

from __future__ import annotations


class AdvisoryCronError(Exception):
    """Base class for this app's errors."""


class LockNotAcquired(AdvisoryCronError):
    """Another process holds the job's lock (raised when ``on_locked="raise"``)."""


class LockScopeError(AdvisoryCronError):
    """A lock scope cannot be used here (e.g. transaction scope inside ``atomic()``)."""


class LockDatabaseError(AdvisoryCronError):
    """The lock database alias is not usable for advisory locks (not PostgreSQL)."""


class DatabaseUnavailable(AdvisoryCronError):
    """The lock database could not be reached."""


class UnknownJob(AdvisoryCronError, LookupError):
    """No registered job (or management command) has this name."""
