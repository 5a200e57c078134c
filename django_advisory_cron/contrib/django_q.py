"""Schedule registered jobs through django-q2, once per tick across every cluster.

Every job with a ``schedule`` gets one django-q2 ``Schedule`` of CRON type, named
``advisory_cron:<job>``, that calls :func:`run_scheduled` with the job's name. django-q2 passes
the time it *meant* to run the schedule (the row's ``next_run`` before the scheduler advances
it) through the row's ``intended_date_kwarg``, so every delivery of one tick — several
clusters, a retry while the first delivery still runs, a failed task redelivered — claims the
same ``(job, tick)`` record, and each delivery after the first is a recorded skip.

Rows are recognised by their name prefix *and* their ``func``; rows made by hand are never
touched. Needs the ``[q2]`` extra (``django-q2`` with ``croniter``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

try:
    import django_q  # noqa: F401  (only to fail early with a clear message)
except ImportError as error:  # pragma: no cover - exercised in a subprocess without django_q
    raise ImportError(
        "django_advisory_cron.contrib.django_q needs django-q2: "
        "pip install 'django-advisory-cron[q2]' and add 'django_q' to INSTALLED_APPS"
    ) from error

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections, router, transaction

from ..conf import APP_LABEL, app_settings
from ..exceptions import UnknownJob
from ..jobs import Job, registry
from ..locks import advisory_lock
from ..models import RunStatus
from ..runner import RunResult

if TYPE_CHECKING:
    from django.apps import AppConfig

logger = logging.getLogger("django_advisory_cron")

#: The dotted path django-q2 calls; synced rows are recognised by it and by :data:`PREFIX`.
RUNNER = f"{__name__}.run_scheduled"
#: Prefix of the ``Schedule.name`` of every synced row.
PREFIX = "advisory_cron:"
#: The keyword argument through which django-q2 passes the intended run time.
INTENDED_KWARG = "intended"
#: ``Schedule.name`` is a ``CharField(max_length=100)`` in django-q2.
NAME_MAX_LENGTH = 100
#: The advisory lock that serialises concurrent syncs (every replica may sync at start-up).
SYNC_LOCK = "django_advisory_cron.sync_schedules"
SYNC_LOCK_WAIT = 60

CATCH_UP_CHOICES = ("latest", "all", "none")
#: At most this many missed ticks are run (``"all"``) or listed as passed over.
MAX_CATCH_UP = 64

APP = APP_LABEL


def _schedule_model() -> Any:
    """django-q2's ``Schedule`` model, imported late: it needs ``django_q`` installed."""
    from django_q.models import Schedule

    return Schedule


def schedule_name(job_name: str) -> str:
    """The ``Schedule.name`` of the row synced for ``job_name``."""
    return f"{PREFIX}{job_name}"


# -- running a delivery ---------------------------------------------------------------------


def _parse_intended(value: str | datetime | None) -> datetime | None:
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if moment.tzinfo is None:
        from django.utils import timezone

        moment = timezone.make_aware(moment)
    return moment


def database_now(alias: str) -> datetime:
    """The database server's clock: ticks are judged on it, never on a host's clock."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT now()")
        row = cursor.fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def ticks_to_run(
    job: Job[Any, Any], tick: datetime, now: datetime, policy: str
) -> tuple[list[datetime], list[datetime]]:
    """Split the missed ticks from ``tick`` up to ``now`` into (to run, passed over).

    A delivery is on time when no later tick of the job has passed yet; then only ``tick``
    runs. A late delivery (the clusters were down, or the queue was backed up) is a catch-up:
    ``"latest"`` runs the most recent passed tick once, ``"all"`` runs the missed ticks in
    order (the most recent :data:`MAX_CATCH_UP`), ``"none"`` runs nothing.
    """
    schedule = job.schedule
    assert schedule is not None
    latest = schedule.previous_tick(now)
    if latest <= tick:
        return [tick], []
    missed = [latest]
    while len(missed) < MAX_CATCH_UP:
        earlier = schedule.previous_tick(missed[-1] - timedelta(microseconds=1))
        if earlier < tick:
            break
        missed.append(earlier)
    missed.reverse()
    if policy == "all":
        return missed, []
    if policy == "none":
        return [], missed
    return [latest], missed[:-1]


def _summary(result: RunResult) -> dict[str, Any]:
    return {
        "tick": result.tick.isoformat() if result.tick else None,
        "status": RunStatus(result.status).value,
        "run_id": result.run_id,
    }


def run_scheduled(
    job_name: str,
    *args: Any,
    intended: str | datetime | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Entry point django-q2 calls for a synced schedule; returns a summary of what ran.

    ``intended`` is the time django-q2 meant to run the schedule (ISO 8601); the run claims the
    tick nearest to it, not to the moment a worker picked the task up. Extra ``args`` and
    ``kwargs`` (from a hand-made schedule) are passed to the job. A job failure is recorded and
    re-raised so django-q2 lists it; its redelivery finds the tick taken and skips.
    """
    try:
        job = registry.get(job_name)
    except UnknownJob:
        # Raising would make django-q2 redeliver the task forever (failures are not acked).
        logger.error(
            "django-q2 delivered unknown job %r; remove its schedule (sync_schedules --prune)",
            job_name,
        )
        return {"job": job_name, "runs": [], "error": "unknown job"}
    moment = _parse_intended(intended)
    summary: dict[str, Any] = {
        "job": job.name,
        "intended": moment.isoformat() if moment else None,
        "runs": [],
    }
    schedule = job.schedule
    if moment is None or schedule is None:
        summary["runs"].append(_summary(job.run(*args, **kwargs)))
        return summary
    max_skew = app_settings.MAX_SKEW
    tick = schedule.nearest_tick(moment, max_skew)
    if tick is None:
        logger.warning(
            "job %s: django-q2 meant to run it at %s, which is no tick of %r; running it "
            "unscheduled (is its Schedule out of date? run sync_schedules)",
            job.name,
            moment.isoformat(),
            schedule.expression,
        )
        summary["runs"].append(_summary(job.run(*args, now=moment, **kwargs)))
        return summary
    now = database_now(job.using or app_settings.lock_database)
    policy = app_settings.CATCH_UP
    to_run, passed_over = ticks_to_run(job, tick, now, policy)
    if passed_over or len(to_run) > 1:
        logger.warning(
            "job %s: late delivery for tick %s (database time %s); catch-up policy %r runs "
            "%d tick(s), passes over %d",
            job.name,
            tick.isoformat(),
            now.isoformat(),
            policy,
            len(to_run),
            len(passed_over),
        )
    summary["passed_over"] = [missed.isoformat() for missed in passed_over]
    for run_tick in to_run:
        summary["runs"].append(_summary(job.run(*args, now=run_tick, **kwargs)))
    return summary


# -- syncing schedules ------------------------------------------------------------------------

Action = Literal["create", "update", "delete", "unchanged", "stale", "invalid"]


@dataclass(frozen=True)
class Change:
    """One row of a sync plan."""

    action: Action
    job: str
    detail: str = ""

    def describe(self, dry_run: bool = False) -> str:
        verbs = {
            "create": ("created", "would create"),
            "update": ("updated", "would update"),
            "delete": ("deleted", "would delete"),
            "unchanged": ("unchanged", "unchanged"),
            "stale": ("kept (use --prune to delete)", "would keep (use --prune to delete)"),
            "invalid": ("not synced", "would not sync"),
        }
        verb = verbs[self.action][1 if dry_run else 0]
        text = f"{verb}: {schedule_name(self.job)}"
        return f"{text} ({self.detail})" if self.detail else text


def scheduled_jobs() -> list[Job[Any, Any]]:
    return [job for job in registry.all() if job.cron is not None]


def _desired(job: Job[Any, Any]) -> dict[str, Any]:
    schedule_model = _schedule_model()
    assert job.schedule is not None
    return {
        "func": RUNNER,
        "args": repr(job.name),
        "kwargs": None,
        "schedule_type": schedule_model.CRON,
        "cron": job.schedule.expression,
        "intended_date_kwarg": INTENDED_KWARG,
    }


def _differences(row: Any, desired: dict[str, Any]) -> list[str]:
    return [field for field, value in desired.items() if getattr(row, field) != value]


def ours() -> Any:
    """The ``Schedule`` rows this app manages (name prefix and runner both match)."""
    return _schedule_model().objects.filter(func=RUNNER, name__startswith=PREFIX)


def _plan_and_apply(prune: bool, dry_run: bool) -> list[Change]:
    schedule_model = _schedule_model()
    now = datetime.now().astimezone()
    rows: dict[str, list[Any]] = {}
    for row in ours().order_by("id"):
        rows.setdefault(row.name[len(PREFIX) :], []).append(row)
    changes: list[Change] = []
    wanted: set[str] = set()
    for job in scheduled_jobs():
        if len(schedule_name(job.name)) > NAME_MAX_LENGTH:
            changes.append(
                Change("invalid", job.name, f"name longer than {NAME_MAX_LENGTH} characters")
            )
            continue
        if job.schedule is None:  # pragma: no cover - cron is set for scheduled jobs
            continue
        wanted.add(job.name)
        desired = _desired(job)
        existing = rows.get(job.name, [])
        for duplicate in existing[1:]:
            changes.append(Change("delete", job.name, f"duplicate row id {duplicate.id}"))
            if not dry_run:
                duplicate.delete()
        if not existing:
            changes.append(Change("create", job.name, job.schedule.expression))
            if not dry_run:
                schedule_model.objects.create(
                    name=schedule_name(job.name),
                    repeats=-1,
                    next_run=job.schedule.next_tick(now),
                    **desired,
                )
            continue
        row = existing[0]
        different = _differences(row, desired)
        if not different:
            changes.append(Change("unchanged", job.name, job.schedule.expression))
            continue
        changes.append(Change("update", job.name, ", ".join(different)))
        if not dry_run:
            if "cron" in different:
                row.next_run = job.schedule.next_tick(now)
            for field, value in desired.items():
                setattr(row, field, value)
            row.save()
    for name, leftover in rows.items():
        if name in wanted:
            continue
        reason = "job no longer registered" if name not in registry else "job has no schedule"
        for row in leftover:
            changes.append(Change("delete" if prune else "stale", name, reason))
            if prune and not dry_run:
                row.delete()
    return changes


def sync(*, prune: bool = False, dry_run: bool = False) -> list[Change]:
    """Create, update (and with ``prune`` delete) the synced rows; return what changed.

    Idempotent. Concurrent syncs (every replica at start-up) serialise on an advisory lock and
    commit before releasing it, so the second finds the first's rows and changes nothing.
    """
    alias = router.db_for_write(_schedule_model())
    with advisory_lock(
        SYNC_LOCK, scope="transaction", wait=SYNC_LOCK_WAIT, using=app_settings.lock_database
    ) as lock:
        if not lock.acquired:
            raise TimeoutError(f"another process held the schedule sync lock for {SYNC_LOCK_WAIT}s")
        with transaction.atomic(using=alias):
            return _plan_and_apply(prune, dry_run)


def out_of_date() -> list[Change]:
    """Changes a sync would make, without the lock (for the system check)."""
    return [
        change
        for change in _plan_and_apply(prune=False, dry_run=True)
        if change.action in ("create", "update", "delete")
    ]


def sync_after_migrate(
    sender: AppConfig, using: str = "default", verbosity: int = 1, **kwargs: Any
) -> None:
    """``post_migrate`` receiver, connected when ``SYNC_ON_MIGRATE`` is set."""
    mode = app_settings.SYNC_ON_MIGRATE
    schedule_model = _schedule_model()
    if not mode or using != router.db_for_write(schedule_model):
        return
    if schedule_model._meta.db_table not in connections[using].introspection.table_names():
        return  # django_q is not migrated yet
    changes = sync(prune=mode == "prune")
    for change in changes:
        if change.action != "unchanged" and verbosity >= 1:
            print(f"  django-advisory-cron: {change.describe()}")


# -- system checks ----------------------------------------------------------------------------


def register_checks() -> None:
    """Register the django-q2 checks (only called when ``django_q`` is installed)."""
    checks.register(check_q_cluster)
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
                id=f"{APP}.W060",
            )
        )
    elif retry <= timeout:
        messages.append(
            checks.Warning(
                f"Q_CLUSTER['retry'] ({retry}s) is not greater than Q_CLUSTER['timeout'] "
                f"({timeout}s): a task still running is delivered again.",
                hint="Set 'retry' greater than 'timeout'. The lock and the tick record "
                "absorb the duplicates, but each costs a worker and a skipped run row.",
                id=f"{APP}.W061",
            )
        )
    if timeout is not None:
        for job in scheduled_jobs():
            if job.max_runtime is not None and job.max_runtime > timeout:
                messages.append(
                    checks.Warning(
                        f"Job {job.name!r} may run {job.max_runtime}s (max_runtime) but "
                        f"django-q2 kills tasks after Q_CLUSTER['timeout'] = {timeout}s.",
                        hint="Raise Q_CLUSTER['timeout'] (and 'retry' above it), or lower "
                        "the job's max_runtime. A killed run is recorded as interrupted and "
                        "its tick is run again on redelivery.",
                        id=f"{APP}.W062",
                    )
                )
    zone = options.get("time_zone")
    if zone is not None and zone != settings.TIME_ZONE:
        messages.append(
            checks.Warning(
                f"Q_CLUSTER['time_zone'] ({zone!r}) differs from TIME_ZONE "
                f"({settings.TIME_ZONE!r}): django-q2 and the job schedules disagree on ticks.",
                hint="Remove Q_CLUSTER['time_zone'] or make it equal to TIME_ZONE.",
                id=f"{APP}.W063",
            )
        )
    return messages


def check_schedules_synced(
    app_configs: Sequence[Any] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """Warn when scheduled jobs have no (or an outdated) django-q2 ``Schedule``."""
    alias = router.db_for_write(_schedule_model())
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
            id=f"{APP}.W064",
        )
    ]


__all__ = [
    "CATCH_UP_CHOICES",
    "INTENDED_KWARG",
    "PREFIX",
    "RUNNER",
    "Change",
    "run_scheduled",
    "schedule_name",
    "sync",
    "ticks_to_run",
]
