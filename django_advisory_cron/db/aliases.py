"""Which database alias our locks and statements go to, resolved in one place."""

from __future__ import annotations

from ..conf import app_settings


def lock_database(*choices: str | None) -> str:
    """The first alias of ``choices`` that is given (a call's ``using``, then a job's), else
    the ``LOCK_DATABASE`` setting (by default Django's default database)."""
    return next((alias for alias in choices if alias), app_settings.lock_database)
