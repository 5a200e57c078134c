"""The ``ADVISORY_CRON`` settings dict: one typed property per key, defaults and validation.

``app_settings.MAX_SKEW`` reads ``settings.ADVISORY_CRON`` on every access (nothing is cached),
so ``override_settings`` works in tests. Each key has its own system check id, so one key's
problem can be silenced without hiding the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from django.conf import settings

#: The app label, and the prefix of every system check id.
APP_LABEL = "django_advisory_cron"
#: The tag of our system checks: ``manage.py check --tag advisory_cron`` runs only them.
CHECK_TAG = "advisory_cron"

#: The default lock namespace: the ASCII bytes ``b"cron"`` read as a signed 32-bit integer.
DEFAULT_NAMESPACE = int.from_bytes(b"cron", "big", signed=True)

Pooling = Literal["none", "session", "transaction", "statement"]
CatchUp = Literal["latest", "all", "none"]

POOLING_CHOICES: tuple[Pooling | None, ...] = (None, "none", "session", "transaction", "statement")
CATCH_UP_CHOICES: tuple[CatchUp, ...] = ("latest", "all", "none")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: object) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return None
    return "must be a positive number of seconds"


def _namespace(value: object) -> str | None:
    if _is_int(value) and -(2**31) <= cast(int, value) < 2**31:
        return None
    return "must be a signed 32-bit integer"


def _lock_database(value: object) -> str | None:
    if value is None or (isinstance(value, str) and value in settings.DATABASES):
        return None
    return f"{value!r} is not an alias in DATABASES"


def _module(value: object) -> str | None:
    if isinstance(value, str) and value.isidentifier():
        return None
    return "must be a module name such as 'tasks'"


def _days(value: object) -> str | None:
    if value is None or (_is_int(value) and cast(int, value) > 0):
        return None
    return "must be a positive integer or None"


def _count(value: object) -> str | None:
    if _is_int(value) and cast(int, value) >= 0:
        return None
    return "must be an integer >= 0"


def _one_of(choices: tuple[object, ...]) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        # ``in`` alone would accept 1 for True and 0 for False.
        if any(
            value is choice or (type(value) is type(choice) and value == choice)
            for choice in choices
        ):
            return None
        return f"must be one of {', '.join(map(repr, choices))}"

    return check


@dataclass(frozen=True)
class Setting:
    """One key of ``ADVISORY_CRON``: its default, its check id and its validator."""

    default: Any
    check_id: str
    validate: Callable[[object], str | None]


SETTINGS: dict[str, Setting] = {
    # First key of every two-int advisory lock this app takes (the lock table's ``classid``).
    "NAMESPACE": Setting(DEFAULT_NAMESPACE, "E101", _namespace),
    # Database alias that holds the locks and the run history; ``None`` means "default".
    "LOCK_DATABASE": Setting(None, "E102", _lock_database),
    # Seconds of clock skew tolerated around a schedule tick (symmetric).
    "MAX_SKEW": Setting(60, "E103", _seconds),
    # Module imported from every installed app at start-up to register jobs.
    "JOBS_MODULE": Setting("tasks", "E104", _module),
    # Days of run history to keep; ``None`` keeps everything.
    "HISTORY_DAYS": Setting(90, "E105", _days),
    # How the lock database is reached: ``None`` (detect), "none", "session", "transaction".
    "POOLING": Setting(None, "E106", _one_of(POOLING_CHOICES)),
    # Seconds between checks that a session lock's connection is alive (each renews the lease).
    "HEARTBEAT": Setting(2, "E107", _seconds),
    # Seconds a running session-scoped run stays alive without a heartbeat renewing it.
    "LEASE": Setting(8, "E108", _seconds),
    # Seconds after which a held lock is called stale when its job sets no ``max_runtime``.
    "STALE_AFTER": Setting(3600, "E109", _seconds),
    # Seconds past a scheduled tick (plus MAX_SKEW) before a job with no success is overdue.
    "OVERDUE_GRACE": Setting(300, "E110", _seconds),
    # django-q2: which ticks a late delivery runs: "latest", "all" or "none".
    "CATCH_UP": Setting("latest", "E111", _one_of(CATCH_UP_CHOICES)),
    # django-q2: sync the schedules after ``migrate``: False, True, or "prune".
    "SYNC_ON_MIGRATE": Setting(False, "E112", _one_of((False, True, "prune"))),
    # Seconds a connection attempt of ours may take before the database counts as unreachable.
    "CONNECT_TIMEOUT": Setting(5, "E113", _seconds),
    # Seconds one of our own statements (acquire, finish) may wait for an answer.
    "STATEMENT_TIMEOUT": Setting(30, "E114", _seconds),
    # Idle lock connections a process keeps per alias for the next session lock (0: none, a
    # connection is opened and closed per lock).
    "LOCK_POOL_SIZE": Setting(8, "E130", _count),
    # Seconds after which a kept lock connection is closed instead of reused.
    "LOCK_CONNECTION_MAX_AGE": Setting(300, "E131", _seconds),
}

DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}

#: Check id of an ``ADVISORY_CRON`` that is not a dict, or has a key that does not exist.
NOT_A_DICT_ID = "E001"
UNKNOWN_KEY_ID = "E100"
#: Check id of a LEASE too short for its HEARTBEAT.
LEASE_TOO_SHORT_ID = "E115"
#: A lease must outlast this many heartbeats: one to notice a loss, one to stop, one spare.
LEASE_HEARTBEATS = 3


def _user_settings() -> dict[str, Any]:
    value = getattr(settings, "ADVISORY_CRON", {})
    return value if isinstance(value, dict) else {}


class AppSettings:
    """Typed, always-current access to ``settings.ADVISORY_CRON``."""

    def _get(self, name: str) -> Any:
        return _user_settings().get(name, DEFAULTS[name])

    @property
    def NAMESPACE(self) -> int:
        return int(self._get("NAMESPACE"))

    @property
    def LOCK_DATABASE(self) -> str | None:
        return cast("str | None", self._get("LOCK_DATABASE"))

    @property
    def lock_database(self) -> str:
        """The alias that holds locks and history."""
        return self.LOCK_DATABASE or "default"

    @property
    def MAX_SKEW(self) -> float:
        return float(self._get("MAX_SKEW"))

    @property
    def JOBS_MODULE(self) -> str:
        return cast(str, self._get("JOBS_MODULE"))

    @property
    def HISTORY_DAYS(self) -> int | None:
        return cast("int | None", self._get("HISTORY_DAYS"))

    @property
    def POOLING(self) -> Pooling | None:
        return cast("Pooling | None", self._get("POOLING"))

    @property
    def HEARTBEAT(self) -> float:
        return float(self._get("HEARTBEAT"))

    @property
    def LEASE(self) -> float:
        return float(self._get("LEASE"))

    @property
    def STALE_AFTER(self) -> float:
        return float(self._get("STALE_AFTER"))

    @property
    def OVERDUE_GRACE(self) -> float:
        return float(self._get("OVERDUE_GRACE"))

    @property
    def CATCH_UP(self) -> CatchUp:
        return cast(CatchUp, self._get("CATCH_UP"))

    @property
    def SYNC_ON_MIGRATE(self) -> bool | Literal["prune"]:
        return cast("bool | Literal['prune']", self._get("SYNC_ON_MIGRATE"))

    @property
    def CONNECT_TIMEOUT(self) -> float:
        return float(self._get("CONNECT_TIMEOUT"))

    @property
    def STATEMENT_TIMEOUT(self) -> float:
        return float(self._get("STATEMENT_TIMEOUT"))

    @property
    def LOCK_POOL_SIZE(self) -> int:
        return int(self._get("LOCK_POOL_SIZE"))

    @property
    def LOCK_CONNECTION_MAX_AGE(self) -> float:
        return float(self._get("LOCK_CONNECTION_MAX_AGE"))


app_settings = AppSettings()


@dataclass(frozen=True)
class Problem:
    """One invalid setting: the key, what is wrong, and its check id (``E1xx``)."""

    key: str
    message: str
    check_id: str


def problems() -> list[Problem]:
    """Every invalid setting; the system checks report each under its own id."""
    raw = getattr(settings, "ADVISORY_CRON", {})
    if not isinstance(raw, dict):
        return [
            Problem("ADVISORY_CRON", f"must be a dict, not {type(raw).__name__}", NOT_A_DICT_ID)
        ]
    found = [
        Problem(
            key, f"is not a known setting (known: {', '.join(sorted(SETTINGS))})", UNKNOWN_KEY_ID
        )
        for key in raw
        if key not in SETTINGS
    ]
    for key, setting in SETTINGS.items():
        message = setting.validate(raw.get(key, setting.default))
        if message:
            found.append(Problem(key, message, setting.check_id))
    if not found and app_settings.LEASE < LEASE_HEARTBEATS * app_settings.HEARTBEAT:
        found.append(
            Problem(
                "LEASE",
                f"must be at least {LEASE_HEARTBEATS} x HEARTBEAT "
                f"({LEASE_HEARTBEATS * app_settings.HEARTBEAT:g} s), so a live run is never "
                "taken for a dead one",
                LEASE_TOO_SHORT_ID,
            )
        )
    return found
