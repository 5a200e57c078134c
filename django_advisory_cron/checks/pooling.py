"""System checks for connection pooling (PgBouncer and friends), for a lock database that
reaches a standby, and for ``SYNCHRONOUS_COMMIT`` on a server with no synchronous standby.

Static checks read settings only and always run. The live check opens a connection per alias
to see whether it reaches a standby, then two short ones (see ``probe()``), so it is
registered under Django's ``database`` tag and runs only when asked:
``manage.py check --database default`` (``migrate`` does it too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from .. import conf
from ..conf import CHECK_TAG, app_settings, check_id
from ..db import pooler, sql
from ..db.connections import standby_at, unpooled_connection
from ..db.execute import fetch_one
from ..exceptions import DatabaseUnavailable
from ..jobs.job import Job, registry

FIX_HINT = (
    "Use scope='transaction' for these jobs (safe behind any pooler), or point "
    "ADVISORY_CRON['LOCK_DATABASE'] at an alias that connects to PostgreSQL directly."
)
STANDBY_HINT = (
    "Point the alias at the primary; with several servers (a failover pair), list them all in "
    "HOST and PORT and set OPTIONS['target_session_attrs'] = 'read-write', so that libpq skips "
    "standbys. See the failover page of the docs."
)
PREPARED_HINT = (
    "PgBouncer before 1.21 does not track prepared statements in transaction pooling: psycopg "
    "fails with DuplicatePreparedStatement. Remove OPTIONS['prepare_threshold'] (Django's "
    "default disables prepared statements) or OPTIONS['server_side_binding'], or run "
    "PgBouncer >= 1.21 with max_prepared_statements > 0."
)


def register() -> None:
    """Register the pooling checks (called from ``register()``)."""
    checks.register(check_pooling_static, CHECK_TAG)
    checks.register(check_pooling_live, CHECK_TAG, checks.Tags.database)


def _postgres_aliases() -> set[str]:
    return {
        alias
        for alias, entry in settings.DATABASES.items()
        if any(name in str(entry.get("ENGINE", "")) for name in ("postgresql", "postgis"))
    }


def jobs_by_alias() -> dict[str, list[Job[Any, Any]]]:
    """Registered jobs grouped by the PostgreSQL alias that holds their lock.

    The lock alias is always present (bare ``advisory_lock()`` and ``runlocked <command>``
    use it), even without jobs.
    """
    postgres = _postgres_aliases()
    grouped: defaultdict[str, list[Job[Any, Any]]] = defaultdict(list)
    lock_alias = app_settings.lock_database
    if lock_alias in postgres:
        grouped[lock_alias]
    for job in registry.all():
        alias = job.using or lock_alias
        if alias in postgres:
            grouped[alias].append(job)
    return dict(grouped)


def _names(jobs: Iterable[Job[Any, Any]]) -> str:
    return ", ".join(repr(job.name) for job in jobs)


def _uses_prepared_statements(alias: str) -> bool:
    options = settings.DATABASES[alias].get("OPTIONS") or {}
    return (
        options.get("server_side_binding") is True and options.get("prepare_threshold") is not None
    )


def _prepared_warning(alias: str, why: str) -> checks.Warning:
    return checks.Warning(
        f"Database {alias!r} uses psycopg server-side binding with prepared statements "
        f"(OPTIONS['prepare_threshold']) and is transaction pooled ({why}).",
        hint=PREPARED_HINT,
        id=check_id("W012"),
    )


def check_pooling_static(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    if conf.problems():
        return []  # invalid settings are reported by check_settings
    messages: list[checks.CheckMessage] = []
    probe_key = pooler.probe_key()
    for job in registry.all():
        if job.key.lock_ids == probe_key.lock_ids or job.name == pooler.PROBE_NAME:
            messages.append(
                checks.Error(
                    f"Job {job.name!r} uses the lock key reserved for the pooling probe.",
                    hint="Rename the job.",
                    id=check_id("E011"),
                )
            )
    for alias, jobs in jobs_by_alias().items():
        mode, reason = pooler.static_pooling(alias)
        if mode not in ("transaction", "statement"):
            continue
        session_jobs = [job for job in jobs if job.scope == "session"]
        if session_jobs:
            messages.append(
                checks.Warning(
                    f"Jobs {_names(session_jobs)} use session-scoped advisory locks on database "
                    f"{alias!r}, which looks transaction pooled ({reason}): their unlock can run "
                    "on another server connection and do nothing, leaving the lock held.",
                    hint=FIX_HINT,
                    id=check_id("W010"),
                )
            )
        if _uses_prepared_statements(alias):
            messages.append(_prepared_warning(alias, reason))
    return messages


def check_pooling_live(
    app_configs: Sequence[Any] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    if not databases or conf.problems():
        return []
    messages: list[checks.CheckMessage] = []
    for alias, jobs in jobs_by_alias().items():
        if alias in databases:
            standby = _standby_warning(alias)
            messages.extend([standby] if standby else _live_messages(alias, jobs))
    lock_alias = app_settings.lock_database
    if app_settings.SYNCHRONOUS_COMMIT and lock_alias in databases:
        messages.extend(_synchronous_warning(lock_alias))
    return messages


def _synchronous_warning(alias: str) -> list[checks.CheckMessage]:
    """W014 when ``SYNCHRONOUS_COMMIT`` is set and the server names no synchronous standby:
    PostgreSQL then waits for no standby, whatever ``synchronous_commit`` says, and a claim
    can still be lost in a failover. A database that cannot be reached is left to W011."""
    connection = unpooled_connection(alias)
    try:
        row = fetch_one(connection, sql.synchronous_standby_names())
    except (DatabaseError, DatabaseUnavailable):
        return []
    finally:
        connection.close()
    if row is None or row[0]:
        return []
    return [
        checks.Warning(
            f"ADVISORY_CRON['SYNCHRONOUS_COMMIT'] = {app_settings.SYNCHRONOUS_COMMIT!r}, but "
            f"the server of database {alias!r} names no synchronous standby "
            "(synchronous_standby_names is empty): claims wait for no standby, and a tick "
            "claimed just before a failover can run again on the promoted standby.",
            hint="Name the standbys in synchronous_standby_names on the primary (with "
            "synchronous_commit = local there if only the app's claims should wait), or "
            "remove the setting. See the failover page of the docs.",
            id=check_id("W014"),
        )
    ]


def _standby_warning(alias: str) -> checks.Warning | None:
    """W013 when the alias reaches a hot standby: advisory locks work there and exclude
    nobody on the primary, so ``runlocked`` and ``cronworker`` refuse it. One connection (and
    no statement, on a primary); a database that cannot be reached is left to the probe
    (W011), and the pooling of a standby does not matter."""
    connection = unpooled_connection(alias)
    try:
        connection.ensure_connection()
        server = standby_at(connection)
    except DatabaseError:
        return None
    finally:
        connection.close()
    if server is None:
        return None
    return checks.Warning(
        f"Database {alias!r} holds advisory locks and reaches a standby at {server} (in "
        "recovery, read-only): a lock taken there would exclude nobody on the primary, so "
        "runlocked and cronworker refuse it.",
        hint=STANDBY_HINT,
        id=check_id("W013"),
    )


def _live_messages(alias: str, jobs: list[Job[Any, Any]]) -> list[checks.CheckMessage]:
    result = pooler.probe(alias)
    if not result.ok:
        return [
            checks.Warning(
                f"Could not probe database {alias!r} for connection pooling: {result.error}.",
                hint="The static pooling checks still apply; run the check again when the "
                "database is reachable, or declare ADVISORY_CRON['POOLING'].",
                id=check_id("W011"),
            )
        ]
    if result.mode not in ("transaction", "statement"):
        return []
    messages: list[checks.CheckMessage] = []
    proof = f"Database {alias!r} is transaction pooled (live probe: {result.reason})."
    declared = app_settings.POOLING
    if declared is not None and declared not in ("transaction", "statement"):
        # A declared mode wins over detection, so scope='auto' would take session locks here.
        auto = [job for job in jobs if job.scope == "auto"]
        listed = f" Jobs with scope='auto': {_names(auto)}." if auto else ""
        messages.append(
            checks.Error(
                f"{proof} ADVISORY_CRON['POOLING'] = {declared!r} says otherwise, and "
                f"scope='auto' follows it into session-level advisory locks, which leak "
                f"here.{listed}",
                hint="Remove ADVISORY_CRON['POOLING'] (auto then detects the pooler) or set it "
                "to 'transaction'.",
                id=check_id("E012"),
            )
        )
        if _uses_prepared_statements(alias):
            messages.append(_prepared_warning(alias, "live probe"))
    session_jobs = [job for job in jobs if job.scope == "session"]
    if session_jobs:
        messages.append(
            checks.Error(
                f"{proof} Jobs {_names(session_jobs)} ask for session-scoped advisory locks, "
                "which leak here.",
                hint=FIX_HINT,
                id=check_id("E010"),
            )
        )
    return messages
