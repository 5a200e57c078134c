"""Schedule sync: one django-q2 ``Schedule`` of CRON type per scheduled job, and its hook.

Every job with a five-field ``schedule`` gets one row named ``advisory_cron:<job>`` that
calls ``RUNNER`` with the job's name. Interval jobs (``every=``) and six-field expressions
(with seconds) are not synced, nor are jobs with a ``timezone`` other than ``TIME_ZONE`` or
day fields that croniter reads otherwise than cron: django-q2 cannot run them (see
``unsyncable()``). Rows are recognised by their name prefix
*and* their ``func``; rows made by hand are never touched.
``sync_after_migrate()`` is the ``post_migrate`` receiver connected when ``SYNC_ON_MIGRATE``
is set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.db import connections, router, transaction

from ...conf import app_settings
from ...core.cron_reading import days_unlike_croniter
from ...exceptions import ScheduleSyncTimeout
from ...jobs.job import Job, registry
from ...lock.advisory import advisory_lock
from .delivery import INTENDED_KWARG, RUNNER

if TYPE_CHECKING:
    from django.apps import AppConfig

#: Prefix of the ``Schedule.name`` of every synced row.
PREFIX = "advisory_cron:"
#: ``Schedule.name`` is a ``CharField(max_length=100)`` in django-q2.
NAME_MAX_LENGTH = 100
#: The advisory lock that serialises concurrent syncs (every replica may sync at start-up).
SYNC_LOCK = "django_advisory_cron.sync_schedules"
SYNC_LOCK_WAIT = 60


def schedule_model() -> Any:
    """django-q2's ``Schedule`` model, imported late: it needs ``django_q`` installed."""
    from django_q.models import Schedule

    return Schedule


def schedule_name(job_name: str) -> str:
    """The ``Schedule.name`` of the row synced for ``job_name``."""
    return f"{PREFIX}{job_name}"


Action = Literal["create", "update", "delete", "unchanged", "stale", "invalid", "elsewhere"]


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
            "elsewhere": ("not synced", "would not sync"),
        }
        verb = verbs[self.action][1 if dry_run else 0]
        text = f"{verb}: {schedule_name(self.job)}"
        return f"{text} ({self.detail})" if self.detail else text


def tally(changes: Iterable[Change]) -> str:
    """``"create 1, stale 1, update 1"``: how many changes of each action, by action name."""
    counts = Counter(change.action for change in changes)
    return ", ".join(f"{action} {count}" for action, count in sorted(counts.items()))


def unsyncable(job: Job[Any, Any]) -> str | None:
    """Why django-q2 cannot run ``job``'s schedule, or ``None`` when it can (or it has none).

    django-q2's scheduler wakes up every 30 seconds or so and knows no seconds field; its
    ``MINUTES`` schedules count from their first run, so they would not land on the epoch-aligned
    ticks of an interval job either.
    """
    if job.every is not None:
        return f"an interval schedule ({job.schedule_text})"
    if job.at is not None:  # a ONCE row of django-q2's would run at its own pick-up time
        return f"a one-off ({job.schedule_text})"
    if job.cron is not None and len(job.cron.split()) == 6:
        return f"a cron expression with a seconds field ({job.cron!r})"
    if job.timezone is not None and job.timezone != settings.TIME_ZONE:
        # django-q2 evaluates every CRON schedule in one zone, its cluster's.
        return f"a time zone of its own ({job.timezone!r}; TIME_ZONE is {settings.TIME_ZONE!r})"
    if job.cron is not None and days_unlike_croniter(job.cron):
        return (
            f"a day field starting with * beside another day ({job.cron!r}: cron needs both, "
            "croniter either)"
        )
    return None


def scheduled_jobs() -> list[Job[Any, Any]]:
    """The jobs synced to django-q2: those with a schedule it can run."""
    return [job for job in registry.all() if job.cron is not None and unsyncable(job) is None]


def unsyncable_jobs() -> list[tuple[Job[Any, Any], str]]:
    """``(job, reason)`` for each scheduled job that django-q2 cannot run."""
    return [(job, reason) for job in registry.all() if (reason := unsyncable(job)) is not None]


def _desired(job: Job[Any, Any]) -> dict[str, Any]:
    assert job.schedule is not None
    return {
        "func": RUNNER,
        "args": repr(job.name),
        "kwargs": None,
        "schedule_type": schedule_model().CRON,
        "cron": job.schedule.expression,
        "intended_date_kwarg": INTENDED_KWARG,
    }


def _differences(row: Any, desired: dict[str, Any]) -> list[str]:
    return [field for field, value in desired.items() if getattr(row, field) != value]


def ours() -> Any:
    """The ``Schedule`` rows this app manages (name prefix and runner both match)."""
    return schedule_model().objects.filter(func=RUNNER, name__startswith=PREFIX)


def _plan_and_apply(prune: bool, dry_run: bool) -> list[Change]:
    model = schedule_model()
    now = datetime.now().astimezone()
    rows: dict[str, list[Any]] = {}
    for row in ours().order_by("id"):
        rows.setdefault(row.name[len(PREFIX) :], []).append(row)
    changes: list[Change] = []
    wanted: set[str] = set()
    for job, reason in unsyncable_jobs():
        changes.append(Change("elsewhere", job.name, f"{reason}: run it with manage.py cronworker"))
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
                model.objects.create(
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
        if name not in registry:
            reason = "job no longer registered"
        elif unsyncable(registry.get(name)) is not None:
            reason = "django-q2 cannot run its schedule"
        else:
            reason = "job has no schedule"
        for row in leftover:
            changes.append(Change("delete" if prune else "stale", name, reason))
            if prune and not dry_run:
                row.delete()
    return changes


def sync(*, prune: bool = False, dry_run: bool = False) -> list[Change]:
    """Create, update (and with ``prune`` delete) the synced rows; return what changed.

    Idempotent. Concurrent syncs (every replica at start-up) serialise on an advisory lock and
    commit before releasing it, so the second finds the first's rows and changes nothing.
    Raises [ScheduleSyncTimeout][django_advisory_cron.exceptions.ScheduleSyncTimeout]
    (a ``TimeoutError``)
    when another sync holds the lock for ``SYNC_LOCK_WAIT`` seconds.
    """
    alias = router.db_for_write(schedule_model())
    with advisory_lock(
        SYNC_LOCK, scope="transaction", wait=SYNC_LOCK_WAIT, using=app_settings.lock_database
    ) as lock:
        if not lock.acquired:
            raise ScheduleSyncTimeout(
                f"another process held the schedule sync lock for {SYNC_LOCK_WAIT}s"
            )
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
    model = schedule_model()
    if not mode or using != router.db_for_write(model):
        return
    if model._meta.db_table not in connections[using].introspection.table_names():
        return  # django_q is not migrated yet
    changes = sync(prune=mode == "prune")
    for change in changes:
        if change.action != "unchanged" and verbosity >= 1:
            print(f"  django-advisory-cron: {change.describe()}")
