"""The ``ADVISORY_CRON`` settings dict: one typed property per key, defaults and validation.

``app_settings.MAX_SKEW`` reads ``settings.ADVISORY_CRON`` on every access (nothing is cached),
so ``override_settings`` works in tests. Each key has its own system check id, so one key's
problem can be silenced without hiding the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from django.conf import settings

#: The app label, and the prefix of every system check id.
APP_LABEL = "django_advisory_cron"
#: The tag of our system checks: ``manage.py check --tag advisory_cron`` runs only them.
CHECK_TAG = "advisory_cron"


def check_id(code: str) -> str:
    """The full id of one of our system checks: ``check_id("E002")`` is
    ``"django_advisory_cron.E002"``, the id ``SILENCED_SYSTEM_CHECKS`` takes."""
    return f"{APP_LABEL}.{code}"


#: The default lock namespace: the ASCII bytes ``b"cron"`` read as a signed 32-bit integer.
DEFAULT_NAMESPACE = int.from_bytes(b"cron", "big", signed=True)

Pooling = Literal["none", "session", "transaction", "statement"]
#: One entry of ``SCHEDULES``: django-crontab's ``(cron, target[, args[, kwargs]])`` (a list
#: too, as JSON has no tuples) or a dict with named keys.
ScheduleEntry = tuple[Any, ...] | list[Any] | dict[str, Any]
CatchUp = Literal["latest", "all", "none"]
#: ``SYNCHRONOUS_COMMIT``: how far a standby must have the claim and the finish of a run before
#: their statement returns (PostgreSQL's ``synchronous_commit``, for our statements only).
SynchronousCommit = Literal["on", "remote_write", "remote_apply"]
SYNCHRONOUS_COMMIT_CHOICES: tuple[SynchronousCommit | None, ...] = (
    None,
    "remote_write",
    "on",
    "remote_apply",
)

EndpointAccess = Literal["open", "token", "staff"]

POOLING_CHOICES: tuple[Pooling | None, ...] = (None, "none", "session", "transaction", "statement")
CATCH_UP_CHOICES: tuple[CatchUp, ...] = ("latest", "all", "none")
ENDPOINT_ACCESS_CHOICES: tuple[EndpointAccess, ...] = ("open", "token", "staff")
#: The shortest ``ENDPOINT_TOKEN`` accepted: a guessable token is no protection.
MIN_TOKEN_LENGTH = 16


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
    return "must be a whole number, 0 or more"


def _capture_limit(value: object) -> str | None:
    if _is_int(value) and 1024 <= cast(int, value) <= 10_000_000:
        return None
    return "must be a whole number of characters from 1024 to 10000000"


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else "must be True or False"


def _token(value: object) -> str | None:
    if value is None or (isinstance(value, str) and len(value) >= MIN_TOKEN_LENGTH):
        return None
    return f"must be None or a string of at least {MIN_TOKEN_LENGTH} characters"


def _url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def _ping_url(value: object) -> str | None:
    if value is None or (_url(value) and "{job}" in cast(str, value)):
        return None
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(job, str) and _url(url) for job, url in value.items())
    ):
        return None
    return (
        "must be None, an http(s) URL template containing {job}, or a dict of job names to "
        "http(s) URLs"
    )


@dataclass(frozen=True)
class FailureNotices:
    """``FAILURE_NOTICES``: after how many failed runs in a row, and what happens then."""

    after: int = 3
    mail_admins: bool = False
    webhook: str | None = None
    pause: bool = False


def _failure_notices(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - set(FailureNotices.__dataclass_fields__):
        return "must be None or a dict with the keys after, mail_admins, webhook and pause"
    after = value.get("after", FailureNotices.after)
    if not (_is_int(after) and cast(int, after) > 0):
        return "['after'] must be a whole number, 1 or more"
    if any(_flag(value.get(key, False)) for key in ("mail_admins", "pause")):
        return "['mail_admins'] and ['pause'] must be True or False"
    webhook = value.get("webhook")
    if webhook is not None and not _url(webhook):
        return "['webhook'] must be None or an http(s) URL"
    if not (value.get("mail_admins") or webhook or value.get("pause")):
        return "turns nothing on: set mail_admins, webhook or pause"
    return None


def _count_or_none(value: object) -> str | None:
    if value is None or _count(value) is None:
        return None
    return "must be None or a whole number, 0 or more"


#: The levels ``CAPTURE_LEVEL`` takes.
CAPTURE_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


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


def _names(value: object) -> str | None:
    if isinstance(value, (list, tuple)) and all(isinstance(name, str) and name for name in value):
        return None
    return "must be a list of names (strings)"


def _schedules(value: object) -> str | None:
    if isinstance(value, (list, tuple)):
        return None  # each entry is checked on its own (E171-E175)
    return "must be a list of schedules: (cron, job, args, kwargs) tuples or dicts"


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
    # Record a row for every replica that skips a tick (the lock was held, the tick had run,
    # the job was paused). Off: a replica that loses a tick writes nothing, and the history
    # holds one row per tick whatever the number of replicas.
    "RECORD_SKIPS": Setting(False, "E116", _flag),
    # The most characters of a run's captured output kept with it (its beginning and its end).
    "CAPTURE_LIMIT": Setting(65536, "E117", _capture_limit),
    # The level from which a run captures its loggers' records, whatever LOGGING prints.
    "CAPTURE_LEVEL": Setting("INFO", "E118", _one_of(CAPTURE_LEVELS)),
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
    # ``cronstatus`` and the health document call the project unhealthy while fewer
    # ``cronworker`` processes than this are alive (0: the project does not use workers).
    "EXPECT_WORKERS": Setting(0, "E160", _count),
    # Who may read the health/ and metrics/ views: "open", "token" or "staff".
    "ENDPOINT_ACCESS": Setting("staff", "E140", _one_of(ENDPOINT_ACCESS_CHOICES)),
    # The bearer token of ENDPOINT_ACCESS = "token".
    "ENDPOINT_TOKEN": Setting(None, "E141", _token),
    # Send Sentry Crons check-ins from the replica that runs a scheduled tick.
    "SENTRY_CRONS": Setting(False, "E143", _flag),
    # Ping URLs: a template with {job} for every job, or a dict of job name -> URL.
    "PING_URL": Setting(None, "E144", _ping_url),
    # Seconds one ping may take; also the most a process waits for its pings at exit.
    "PING_TIMEOUT": Setting(5, "E145", _seconds),
    # Further attempts after a ping fails.
    "PING_RETRIES": Setting(2, "E146", _count),
    # After N failed runs of a job in a row: mail the ADMINS, POST to a webhook, pause it.
    "FAILURE_NOTICES": Setting(None, "E149", _failure_notices),
    # An OpenTelemetry span per run.
    "OPENTELEMETRY": Setting(False, "E147", _flag),
    # Seconds of history the metrics count runs over.
    "METRICS_WINDOW": Setting(86400, "E148", _seconds),
    # Idle lock connections a process keeps per alias for the next session lock (0: none, a
    # connection is opened and closed per lock; None: 8 while a scheduler runs in the
    # process, cronworker or start_worker(), else 1 that closes after 2 s unused).
    "LOCK_POOL_SIZE": Setting(None, "E130", _count_or_none),
    # Seconds after which a kept lock connection is closed instead of reused.
    "LOCK_CONNECTION_MAX_AGE": Setting(300, "E131", _seconds),
    # Schedules declared in settings, as django-crontab's CRONJOBS: (cron, job, args, kwargs)
    # tuples, or dicts; registered at start-up as jobs of their own (source "settings").
    "SCHEDULES": Setting([], "E170", _schedules),
    # The management commands a schedule kept in the database (admin, cronjob add, import)
    # may call: whoever may add a schedule runs these with any arguments, in every worker.
    # Only clearsessions by default: it deletes expired sessions and takes no path, code or
    # address. SCHEDULES entries are the site's own code and are not held to it.
    "SCHEDULE_COMMANDS": Setting(["clearsessions"], "E176", _names),
    # The claim and the finish of a run wait for a synchronous standby this far ("on",
    # "remote_write", "remote_apply"); None: as the server's synchronous_commit says.
    "SYNCHRONOUS_COMMIT": Setting(None, "E132", _one_of(SYNCHRONOUS_COMMIT_CHOICES)),
}

DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}


def declare(more: dict[str, Setting]) -> None:
    """Add the keys of ``ADVISORY_CRON`` that a delivery target of its own folder reads (when
    its package is imported): checked, listed and defaulted as these."""
    SETTINGS.update(more)
    DEFAULTS.update({name: setting.default for name, setting in more.items()})


#: Check id of an ``ADVISORY_CRON`` that is not a dict, or has a key that does not exist.
NOT_A_DICT_ID = "E001"
UNKNOWN_KEY_ID = "E100"
#: Check id of a LEASE too short for its HEARTBEAT.
LEASE_TOO_SHORT_ID = "E115"
#: Check id of ENDPOINT_ACCESS = "token" without an ENDPOINT_TOKEN.
TOKEN_MISSING_ID = "E142"
#: A lease must outlast this many heartbeats: one to notice a loss, one to stop, one spare.
LEASE_HEARTBEATS = 3


def _user_settings() -> dict[str, Any]:
    value = getattr(settings, "ADVISORY_CRON", {})
    return value if isinstance(value, dict) else {}


class AppSettings:
    """Typed, always-current access to ``settings.ADVISORY_CRON``."""

    def _get(self, name: str) -> Any:
        return _user_settings().get(name, DEFAULTS[name])

    def value(self, name: str) -> Any:
        """A key's value, or its default: for the keys a target declared (``declare``)."""
        return self._get(name)

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
    def RECORD_SKIPS(self) -> bool:
        return bool(self._get("RECORD_SKIPS"))

    @property
    def CAPTURE_LIMIT(self) -> int:
        return int(cast(int, self._get("CAPTURE_LIMIT")))

    @property
    def CAPTURE_LEVEL(self) -> int:
        """As a ``logging`` level number."""
        return int(logging.getLevelName(cast(str, self._get("CAPTURE_LEVEL"))))

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
    def EXPECT_WORKERS(self) -> int:
        return int(self._get("EXPECT_WORKERS"))

    @property
    def ENDPOINT_ACCESS(self) -> EndpointAccess:
        return cast(EndpointAccess, self._get("ENDPOINT_ACCESS"))

    @property
    def ENDPOINT_TOKEN(self) -> str | None:
        return cast("str | None", self._get("ENDPOINT_TOKEN"))

    @property
    def SENTRY_CRONS(self) -> bool:
        return bool(self._get("SENTRY_CRONS"))

    @property
    def PING_URL(self) -> str | dict[str, str] | None:
        return cast("str | dict[str, str] | None", self._get("PING_URL"))

    @property
    def PING_TIMEOUT(self) -> float:
        return float(self._get("PING_TIMEOUT"))

    @property
    def PING_RETRIES(self) -> int:
        return int(self._get("PING_RETRIES"))

    @property
    def FAILURE_NOTICES(self) -> FailureNotices | None:
        value = self._get("FAILURE_NOTICES")
        # An invalid value is off (E149 says why) rather than an error in every run.
        return FailureNotices(**value) if _failure_notices(value) is None and value else None

    @property
    def OPENTELEMETRY(self) -> bool:
        return bool(self._get("OPENTELEMETRY"))

    @property
    def METRICS_WINDOW(self) -> float:
        return float(self._get("METRICS_WINDOW"))

    @property
    def LOCK_POOL_SIZE(self) -> int | None:
        return cast("int | None", self._get("LOCK_POOL_SIZE"))

    @property
    def LOCK_CONNECTION_MAX_AGE(self) -> float:
        return float(self._get("LOCK_CONNECTION_MAX_AGE"))

    @property
    def SCHEDULES(self) -> list[ScheduleEntry]:
        value = self._get("SCHEDULES")
        return list(value) if isinstance(value, (list, tuple)) else []  # else E170

    @property
    def SCHEDULE_COMMANDS(self) -> frozenset[str]:
        return _allowed(self._get("SCHEDULE_COMMANDS"))

    @property
    def SYNCHRONOUS_COMMIT(self) -> SynchronousCommit | None:
        return cast("SynchronousCommit | None", self._get("SYNCHRONOUS_COMMIT"))


def _allowed(value: object) -> frozenset[str]:
    """An allow-list's names; an invalid one allows nothing (its check says why)."""
    return frozenset(cast("list[str]", value)) if _names(value) is None else frozenset()


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
    if not found and app_settings.ENDPOINT_ACCESS == "token" and not app_settings.ENDPOINT_TOKEN:
        found.append(
            Problem(
                "ENDPOINT_ACCESS",
                'is "token" but ENDPOINT_TOKEN is not set: the health and metrics views would '
                "refuse everyone",
                TOKEN_MISSING_ID,
            )
        )
    return found
