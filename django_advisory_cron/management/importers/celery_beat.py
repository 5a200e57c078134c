"""``--from celery-beat``: the ``CELERY_BEAT_SCHEDULE`` setting (celery's ``beat_schedule``
read from Django's settings), else the ``beat_schedule`` of the project's Celery app. A
``crontab()`` becomes a cron expression read in celery's zone (``CELERY_TIMEZONE``, else UTC,
as celery reads it); a ``timedelta``, a number of seconds or a ``schedule()`` an interval. A
task maps to the registered job of that name, or the job whose function is at that dotted
path (celery names a task ``module.function``)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings

from . import Found, NotMappable, Unavailable, described, mapped

#: Each field of a celery ``crontab``, in cron's order, with its range.
CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day_of_month", 1, 31),
    ("month_of_year", 1, 12),
    ("day_of_week", 0, 6),
)


def entries() -> list[Found]:
    """Each entry of ``CELERY_BEAT_SCHEDULE``, by its key."""
    where, beat, zone = _schedule()
    found = []
    for key, spec in beat.items():
        routing = spec.get("options") if isinstance(spec, dict) else None
        found.append(mapped(f"{where}[{key!r}]", partial(_entry, key, spec, zone, where), routing))
    return found


def _schedule() -> tuple[str, dict[Any, Any], str]:
    """Where the schedule is, the schedule, and the zone celery reads its crontabs in: the
    settings' ``CELERY_BEAT_SCHEDULE``, else the ``beat_schedule`` of the Celery app that the
    project made current (as ``proj/__init__.py`` does when it imports its ``celery.py``)."""
    beat = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if isinstance(beat, dict):
        return "CELERY_BEAT_SCHEDULE", beat, getattr(settings, "CELERY_TIMEZONE", None) or "UTC"
    try:
        from celery import current_app
    except ImportError:
        current_app = None
    conf = None if current_app is None else current_app.conf
    if conf is None or not conf.beat_schedule:
        raise Unavailable(
            "the settings have no CELERY_BEAT_SCHEDULE, and no Celery app is loaded with a "
            "beat_schedule (import the project's Celery app where Django starts, in "
            "proj/__init__.py, or copy its beat_schedule into the settings)"
        )
    return "beat_schedule", dict(conf.beat_schedule), conf.timezone or "UTC"


def _entry(key: str, spec: Any, zone: str, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict) or not isinstance(spec.get("task"), str):
        raise NotMappable("an entry is a dict with a 'task' name and a 'schedule'")
    return {
        "name": key,
        "job": spec["task"],
        "args": list(spec.get("args") or ()),
        "kwargs": dict(spec.get("kwargs") or {}),
        **timing(spec.get("schedule"), zone),
        "description": described(f"imported from celery's {where}[{key!r}]"),
    }


def timing(when: Any, zone: str) -> dict[str, Any]:
    """A celery schedule as a ``SCHEDULES`` entry's ``schedule`` (and ``timezone``) or
    ``every``; raises ``NotMappable``."""
    if isinstance(when, timedelta):
        return {"every": when.total_seconds()}
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return {"every": float(when)}
    kind = type(when).__name__
    if kind == "solar":
        raise NotMappable(
            f"a solar schedule ({when.event} at {when.lat}, {when.lon}) has no cron "
            "equivalent: write a cron expression for the times it means"
        )
    if kind == "crontab":
        fields = {name: set(getattr(when, name)) for name, _low, _high in CRON_FIELDS}
        written = {name: cron_field(fields[name], low, high) for name, low, high in CRON_FIELDS}
        if "*" not in (written["day_of_month"], written["day_of_week"]):
            # celery matches both day fields; cron too when one of them starts with *.
            for name, low, high in CRON_FIELDS[2::2]:
                step = step_field(fields[name], low, high)
                if step:
                    written[name] = step
                    break
            else:
                raise NotMappable(both_days())
        return {"schedule": " ".join(written.values()), "timezone": zone}
    if isinstance(getattr(when, "run_every", None), timedelta):
        return {"every": when.run_every.total_seconds()}
    raise NotMappable(
        f"a schedule of type {kind} has no equivalent here: it decides in its own code when "
        "it is due; add a cron expression or interval that ticks as often as it should be "
        "checked ('cronjob add'), and check the rest in the job"
    )


def both_days() -> str:
    """Why a crontab that restricts both kinds of day cannot map."""
    return (
        "it restricts both the day of the month and the day of the week: celery runs on "
        "days that match both, cron on days that match either (both only when one of them "
        "is a step from *, such as */2); split it, or check the day in the job"
    )


def step_field(values: set[int], low: int, high: int) -> str | None:
    """``values`` as a step from ``*`` (``*/2``) when they are one of two values or more (a
    single day as ``*/31`` would say it to no reader), else ``None``."""
    ordered = sorted(values)
    if len(ordered) < 2 or ordered[0] != low:
        return None
    step = ordered[1] - ordered[0]
    return f"*/{step}" if set(range(low, high + 1, step)) == values else None


def cron_field(values: set[int], low: int, high: int) -> str:
    """The values of a crontab's field (its public, expanded form) as a cron field: ``*``
    for all of them, else runs of three or more as ranges (``9-17``)."""
    if values == set(range(low, high + 1)):
        return "*"
    parts, ordered = [], sorted(values)
    start = previous = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        if previous - start >= 2:
            parts.append(f"{start}-{previous}")
        else:
            parts.extend(str(number) for number in range(start, previous + 1))
        if value is not None:
            start = previous = value
    return ",".join(parts)
