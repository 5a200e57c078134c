"""``--from django-celery-beat``: its ``PeriodicTask`` rows, read through its models. A
crontab schedule becomes a cron expression in its zone (read by celery's own parser, as beat
reads it), an interval an interval; the task maps
to a registered job as for ``--from celery-beat``. A clocked schedule becomes a one-off
(``at``), a one-off task a schedule with ``max_runs=1`` (beat runs it at its first tick, then
disables it). Solar schedules run at moments no schedule here says: each is reported with
what to do instead."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.apps import apps

from . import Found, NotMappable, Unavailable, described, mapped
from .celery_beat import timing

#: Seconds in each period of an ``IntervalSchedule``.
PERIODS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}


def entries() -> list[Found]:
    """Each ``PeriodicTask``, by its name."""
    if not apps.is_installed("django_celery_beat"):
        raise Unavailable(
            "django-celery-beat is not installed here: install it and add "
            "'django_celery_beat' to INSTALLED_APPS, beside its tables"
        )
    from django_celery_beat.models import PeriodicTask

    tasks = PeriodicTask.objects.select_related("crontab", "interval", "solar", "clocked")
    return [
        mapped(
            f"PeriodicTask {task.name!r}",
            partial(_entry, task),
            {"queue": task.queue} if task.queue else None,
        )
        for task in tasks.order_by("name")
    ]


def _entry(task: Any) -> dict[str, Any]:
    timing = _timing(task)
    if task.one_off and "at" not in timing:  # beat runs it at its first tick, then disables it
        timing["max_runs"] = 1
    try:
        args, kwargs = json.loads(task.args or "[]"), json.loads(task.kwargs or "{}")
    except ValueError as error:
        raise NotMappable(f"its args or kwargs are not JSON: {error}") from None
    return {
        "name": task.name,
        "job": task.task,
        "args": args,
        "kwargs": kwargs,
        **timing,
        "enabled": task.enabled,
        "starts": task.start_time,
        "ends": task.expires,
        "description": described(
            task.description or f"imported from django-celery-beat's task {task.name!r}"
        ),
    }


def _timing(task: Any) -> dict[str, Any]:
    if task.clocked is not None:  # runs once, at its moment: a one-off
        return {"at": task.clocked.clocked_time}
    if task.solar is not None:
        raise NotMappable(
            f"a solar schedule ({task.solar.event} at {task.solar.latitude}, "
            f"{task.solar.longitude}) has no cron equivalent: write a cron expression for "
            "the times it means"
        )
    if task.interval is not None:
        return {"every": task.interval.every * PERIODS[task.interval.period]}
    row = task.crontab
    if row is None:
        raise NotMappable("it has no schedule")
    # Read as beat reads it, by celery's own parser: it takes celery's spellings ("monday",
    # "mon-fri") and ANDs the two day fields, which celery_beat.timing maps or refuses.
    from celery.schedules import ParseException, crontab

    try:
        parsed = crontab(
            minute=row.minute,
            hour=row.hour,
            day_of_week=row.day_of_week,
            day_of_month=row.day_of_month,
            month_of_year=row.month_of_year,
        )
    except (ValueError, ParseException) as error:
        raise NotMappable(f"celery cannot read its crontab: {error}") from None
    return timing(parsed, str(row.timezone))
