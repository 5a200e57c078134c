"""System checks for django-q2 (registered only when ``django_q`` is installed).

``W060`` to ``W063``: ``Q_CLUSTER`` settings that make duplicate deliveries likely, or that make
django-q2 and the job schedules disagree on ticks. ``W064``: the synced schedules are missing
or out of date (a database check). ``W065``: a job's schedule is one django-q2 cannot run
(an interval, a seconds field, or a time zone of its own), so it is not synced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, router

from ...conf import app_settings, check_id
from ...core.schedule import seconds_text
from ...jobs.job import Job
from .schedules import out_of_date, schedule_model, scheduled_jobs, unsyncable_jobs


def register_checks() -> None:
    """Register the django-q2 checks (only called when ``django_q`` is installed)."""
    checks.register(check_q_cluster)
    checks.register(check_unsyncable_jobs)
    checks.register(check_schedules_synced, checks.Tags.database)


def _q_cluster() -> dict[str, Any]:
    value = getattr(settings, "Q_CLUSTER", {})
    return value if isinstance(value, dict) else {}


def check_q_cluster(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Warn about django-q2 settings that make duplicate deliveries likely."""
    options = _q_cluster()
    timeout = options.get("timeout")
    retry = options.get("retry", 60)
    messages: list[checks.CheckMessage] = []
    if timeout is None:
        messages.append(
            checks.Warning(
                "Q_CLUSTER['timeout'] is not set: a job running longer than "
                f"Q_CLUSTER['retry'] ({retry}s) is delivered again while it still runs.",
                hint="Set Q_CLUSTER['timeout'] above your longest job and 'retry' above "
                "'timeout'. The lock absorbs the duplicates, but each costs a worker.",
                id=check_id("W060"),
            )
        )
    elif retry <= timeout:
        messages.append(
            checks.Warning(
                f"Q_CLUSTER['retry'] ({retry}s) is not greater than Q_CLUSTER['timeout'] "
                f"({timeout}s): a task still running is delivered again.",
                hint="Set 'retry' greater than 'timeout'. The lock and the tick record "
                "absorb the duplicates, but each costs a worker and a round trip.",
                id=check_id("W061"),
            )
        )
    if timeout is not None:
        for job in scheduled_jobs():
            if (outlasts := _outlasts_timeout(job, timeout)) is not None:
                messages.append(outlasts)
    zone = options.get("time_zone")
    if zone is not None and zone != settings.TIME_ZONE:
        messages.append(
            checks.Warning(
                f"Q_CLUSTER['time_zone'] ({zone!r}) differs from TIME_ZONE "
                f"({settings.TIME_ZONE!r}): django-q2 and the job schedules disagree on ticks.",
                hint="Remove Q_CLUSTER['time_zone'] or make it equal to TIME_ZONE.",
                id=check_id("W063"),
            )
        )
    return messages


def _outlasts_timeout(job: Job[..., Any], timeout: float) -> checks.Warning | None:
    """W062 for a job whose task may outlast ``Q_CLUSTER["timeout"]``: its ``max_runtime``,
    after the wait for its tick's jitter offset (spent in the task), or ``None``."""
    jitter = job.jitter or 0
    if job.max_runtime is None and not jitter:
        return None
    longest = jitter + (job.max_runtime or 0)
    if longest <= timeout:
        return None
    if not jitter:
        took = f"may run {job.max_runtime}s (max_runtime)"
    elif job.max_runtime is None:
        took = f"waits up to {seconds_text(jitter)}s (its jitter) before it starts"
    else:
        took = (
            f"may take {seconds_text(longest)}s (up to {seconds_text(jitter)}s of jitter, "
            "then max_runtime)"
        )
    return checks.Warning(
        f"Job {job.name!r} {took} but django-q2 kills tasks after "
        f"Q_CLUSTER['timeout'] = {timeout}s.",
        hint="Raise Q_CLUSTER['timeout'] (and 'retry' above it), or lower the job's "
        "max_runtime or jitter. A killed run is recorded as interrupted and its tick is run "
        "again on redelivery; a task killed while it waits runs nothing.",
        id=check_id("W062"),
    )


def check_unsyncable_jobs(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Warn about scheduled jobs that ``sync_schedules`` skips because django-q2 cannot run
    their schedule."""
    return [
        checks.Warning(
            f"Job {job.name!r} has {reason}, which django-q2 cannot run: sync_schedules "
            "skips it, and nothing runs it through django-q2.",
            hint="Run it with 'manage.py cronworker' on every replica, or give it a "
            "five-field cron expression in TIME_ZONE.",
            id=check_id("W065"),
        )
        for job, reason in unsyncable_jobs()
    ]


def check_schedules_synced(
    app_configs: Sequence[Any] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """Warn when scheduled jobs have no (or an outdated) django-q2 ``Schedule``."""
    alias = router.db_for_write(schedule_model())
    if not databases or alias not in databases or app_settings.SYNC_ON_MIGRATE:
        return []
    try:
        pending = out_of_date()
    except DatabaseError:
        return []  # not migrated yet, or unreachable: other checks report that
    if not pending:
        return []
    return [
        checks.Warning(
            "django-q2 schedules are not in sync with the scheduled jobs: "
            + "; ".join(change.describe(dry_run=True) for change in pending),
            hint="Run 'manage.py sync_schedules' after each deploy, or set "
            "ADVISORY_CRON['SYNC_ON_MIGRATE'] = True.",
            id=check_id("W064"),
        )
    ]
