"""The ``ADVISORY_CRON`` settings dict: defaults, typed access and validation.

Settings are read on every access (not cached), so ``override_settings`` works in tests.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

#: The default lock namespace: the ASCII bytes ``b"cron"`` read as a signed 32-bit integer.
DEFAULT_NAMESPACE = int.from_bytes(b"cron", "big", signed=True)

DEFAULTS: dict[str, Any] = {
    # First key of every two-int advisory lock this app takes (``pg_locks.classid``).
    "NAMESPACE": DEFAULT_NAMESPACE,
    # Database alias that holds the locks and the run history; ``None`` means "default".
    "LOCK_DATABASE": None,
    # Seconds of clock skew tolerated around a schedule tick (symmetric).
    "MAX_SKEW": 60,
    # Module imported from every installed app at start-up to register jobs.
    "JOBS_MODULE": "tasks",
    # Days of run history to keep; ``None`` keeps everything.
    "HISTORY_DAYS": 90,
    # How the lock database is reached: ``None`` (detect), "none", "session", "transaction".
    "POOLING": None,
    # Seconds between checks that a session lock's connection is still alive.
    "HEARTBEAT": 5,
    # Seconds after which a held lock is called stale when its job sets no ``max_runtime``.
    "STALE_AFTER": 3600,
    # django-q2: which ticks a late delivery runs: "latest" (the most recent missed tick, once),
    # "all" (every missed tick, in order) or "none" (wait for the next tick).
    "CATCH_UP": "latest",
    # django-q2: sync the schedules after ``migrate``: False, True, or "prune" (also delete the
    # rows of removed jobs).
    "SYNC_ON_MIGRATE": False,
    # Seconds past a scheduled tick (plus MAX_SKEW) before a job with no success is overdue.
    "OVERDUE_GRACE": 300,
}

POOLING_CHOICES = (None, "none", "session", "transaction", "statement")


def _user_settings() -> dict[str, Any]:
    value = getattr(settings, "ADVISORY_CRON", {})
    return value if isinstance(value, dict) else {}


def get(name: str) -> Any:
    """Return the effective value of one ``ADVISORY_CRON`` key."""
    if name not in DEFAULTS:
        raise KeyError(f"unknown ADVISORY_CRON setting {name!r}")
    return _user_settings().get(name, DEFAULTS[name])


def lock_database() -> str:
    """The alias that holds locks and history."""
    alias: str | None = get("LOCK_DATABASE")
    return alias or "default"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float))) and not isinstance(value, bool)


def problems() -> list[tuple[str, str]]:
    """Return ``(key, message)`` for every invalid setting; used by the system checks."""
    raw = getattr(settings, "ADVISORY_CRON", {})
    if not isinstance(raw, dict):
        return [("ADVISORY_CRON", f"must be a dict, not {type(raw).__name__}")]
    found: list[tuple[str, str]] = []
    for key in raw:
        if key not in DEFAULTS:
            found.append((key, f"is not a known setting (known: {', '.join(sorted(DEFAULTS))})"))
    namespace = get("NAMESPACE")
    if not _is_int(namespace) or not -(2**31) <= namespace < 2**31:
        found.append(("NAMESPACE", "must be a signed 32-bit integer"))
    alias = get("LOCK_DATABASE")
    if alias is not None and (not isinstance(alias, str) or alias not in settings.DATABASES):
        found.append(("LOCK_DATABASE", f"{alias!r} is not an alias in DATABASES"))
    for key in ("MAX_SKEW", "HEARTBEAT", "STALE_AFTER", "OVERDUE_GRACE"):
        value = get(key)
        if not _is_number(value) or value <= 0:
            found.append((key, "must be a positive number of seconds"))
    module = get("JOBS_MODULE")
    if not isinstance(module, str) or not module.isidentifier():
        found.append(("JOBS_MODULE", "must be a module name such as 'tasks'"))
    days = get("HISTORY_DAYS")
    if days is not None and (not _is_int(days) or days <= 0):
        found.append(("HISTORY_DAYS", "must be a positive integer or None"))
    if get("CATCH_UP") not in ("latest", "all", "none"):
        found.append(("CATCH_UP", "must be 'latest', 'all' or 'none'"))
    if get("SYNC_ON_MIGRATE") not in (False, True, "prune"):
        found.append(("SYNC_ON_MIGRATE", "must be False, True or 'prune'"))
    if get("POOLING") not in POOLING_CHOICES:
        found.append(("POOLING", f"must be one of {POOLING_CHOICES}"))
    return found
