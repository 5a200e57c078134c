"""``--from django-q2``: its ``Schedule`` rows, read through its models. A row calls a registered
job's function (by its dotted path) or ``call_command`` with the command's name first. A Cron
row keeps its expression (its day fields written as django-q2's croniter reads them, where cron
reads them otherwise); Minutes becomes an interval; Hourly, Daily, Weekly, Monthly, Quarterly
and Yearly become the cron expression that fires at the row's next run and every period after
(past the 28th, on the day django-q2's own arithmetic settles on), in the zone django-q2 reads
them in (``Q_CLUSTER["time_zone"]``, else ``TIME_ZONE``). A Once row becomes a one-off at its
next run, and a set number of repeats ``max_runs``; Biweekly and Bimonthly rows, a Once row
whose run has passed and one with no repeats left are reported."""

from __future__ import annotations

import ast
from collections import Counter
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from django.apps import apps
from django.conf import settings
from django.utils import timezone

from ...core.cron_reading import croniters_days_in_cron, days_unlike_croniter, one_value_ranges
from ...core.schedule import Schedule, validate
from ...jobs.declared import CALL_COMMAND
from . import Found, Noted, NotMappable, Unavailable, described, mapped

#: The ``func`` of the rows ``sync_schedules`` writes for this library's own jobs.
SYNCED = "django_advisory_cron.contrib.django_q.run_scheduled"
#: How many periods of django-q2's own arithmetic a Monthly, Quarterly or Yearly row is
#: compared over (eight years: a 29 February comes round twice), and how many make a year.
PERIODS = {"M": 96, "Q": 32, "Y": 8}
PER_YEAR = {"M": 12, "Q": 4, "Y": 1}
MICROSECOND = timedelta(microseconds=1)


def entries() -> list[Found]:
    """Each ``Schedule`` row, by its name (its id when it has none; also when another row has
    the same name: django-q2's names need not be unique)."""
    if not apps.is_installed("django_q"):
        raise Unavailable(
            "django-q2 is not installed here: install it and add 'django_q' to INSTALLED_APPS"
        )
    from django_q.models import Schedule

    rows = list(Schedule.objects.order_by("name", "id"))
    names = Counter(_name(row) for row in rows)
    return [
        mapped(
            f"django-q2 Schedule {_name(row)!r}"
            + (f" (id {row.id})" if names[_name(row)] > 1 else ""),
            partial(_entry, row),
        )
        for row in rows
    ]


def _name(row: Any) -> str:
    return row.name or f"q2-schedule-{row.id}"


def _entry(row: Any) -> dict[str, Any] | Noted:
    if row.func == SYNCED:
        raise NotMappable(
            "sync_schedules wrote it for a job already defined here: cronworker runs that "
            "job; delete the row once django-q2 no longer schedules it"
        )
    if row.repeats == 0:
        raise NotMappable("it runs no more (its repeats are 0): nothing to import")
    args, kwargs = _arguments(row)
    kwargs.pop("q_options", None)
    target: dict[str, Any] = {"job": row.func}
    if row.func == CALL_COMMAND:
        if not args or not isinstance(args[0], str):
            raise NotMappable(f"it calls {CALL_COMMAND} without a command's name first")
        target = {"command": args[0]}
        args = args[1:]
    timing, notes = _timing(row)
    if row.repeats is not None and row.repeats > 0:  # its next runs: a schedule's runs to come
        timing["max_runs"] = row.repeats
    entry = {
        "name": _name(row),
        **target,
        "args": args,
        "kwargs": kwargs,
        **timing,
        "description": described(f"imported from django-q2's schedule {_name(row)!r}"),
    }
    return Noted(entry, notes) if notes else entry


def _arguments(row: Any) -> tuple[list[Any], dict[str, Any]]:
    """The row's arguments, read as django-q2 reads them."""
    try:
        args = ast.literal_eval(row.args) if row.args else ()
        kwargs: Any = {}
        if row.kwargs:
            try:
                kwargs = ast.literal_eval(row.kwargs)
            except (SyntaxError, ValueError):
                call = ast.parse(f"f({row.kwargs})").body[0]
                assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
                kwargs = {
                    str(keyword.arg): ast.literal_eval(keyword.value)
                    for keyword in call.value.keywords
                }
    except (SyntaxError, ValueError) as error:
        raise NotMappable(f"its args or kwargs cannot be read: {error}") from None
    if not isinstance(kwargs, dict):
        raise NotMappable(f"its kwargs are not keyword arguments: {row.kwargs!r}")
    return list(args) if isinstance(args, tuple) else [args], kwargs


def _timing(row: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The row's schedule as a ``SCHEDULES`` entry's keys, and notes on how it maps."""
    kind, zone = row.schedule_type, _zone()
    where = {"timezone": zone} if zone != settings.TIME_ZONE else {}
    if kind == "C":
        return _cron(row.cron, where)
    if kind == "I":
        return {"every": (row.minutes or 1) * 60}, ()
    if kind == "O":  # once, at its next run: a one-off
        if row.next_run is None or row.next_run <= timezone.now():
            raise NotMappable(
                f"it runs once, at {row.next_run:%Y-%m-%d %H:%M %Z}, which has passed: "
                "'cronjob trigger' it to run it now"
            )
        return {"at": row.next_run, **where}, ()
    if kind in ("BW", "BM"):
        label = {"BW": "every two weeks", "BM": "every two months"}[kind]
        raise NotMappable(
            f"it runs {label}, which no cron expression says: add it by hand with a cron "
            "expression (a weekly or monthly one, checking the week in the job) or "
            "'cronjob trigger' it"
        )
    at = row.next_run.astimezone(ZoneInfo(zone))
    day_of_week = (at.weekday() + 1) % 7
    fields = {
        "H": f"{at.minute} * * * *",
        "D": f"{at.minute} {at.hour} * * *",
        "W": f"{at.minute} {at.hour} * * {day_of_week}",
    }
    if kind in fields:
        return {"schedule": fields[kind], **where}, ()
    if kind not in PERIODS:
        raise NotMappable(f"its schedule type {kind!r} is not known here")
    return _calendar(row, zone, where)


def _cron(cron: str, where: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A Cron row's expression, its day fields written as django-q2's croniter reads them
    (a day matches either field when both are restricted, even one starting with ``*``)."""
    written, notes = cron, []
    if validate(cron):  # refused as any bad expression is, by the definition's check
        return {"schedule": cron, **where}, ()
    if days_unlike_croniter(cron):
        found = croniters_days_in_cron(cron)
        if found is None:
            raise NotMappable(
                f"django-q2 (croniter) reads the day fields of {cron!r} otherwise than cron, "
                "and no cron expression says its days: add it by hand"
            )
        written = found
        notes.append(
            f"django-q2 (croniter) reads the day fields of {cron!r} otherwise than cron: "
            f"written {found!r} here, which cron runs on the same days as django-q2"
        )
    plain = one_value_ranges(" ".join(written.split()))
    if plain != " ".join(written.split()):
        notes.append(
            f"django-q2 (croniter) reads a range of one value in {written!r} as the whole "
            f"field (every value); here it is that value, as cron reads it: {plain!r}"
        )
    return {"schedule": written, **where}, tuple(notes)


def _zone() -> str:
    """The zone django-q2 reads its schedules in: ``Q_CLUSTER["time_zone"]``, else
    ``TIME_ZONE``."""
    from django_q.conf import Conf

    return str(Conf.TIME_ZONE or settings.TIME_ZONE or "UTC")


def _calendar(row: Any, zone: str, where: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A Monthly, Quarterly or Yearly row as the cron expression of the runs django-q2 computes
    for it (its own ``calculate_next_run``, for ``PERIODS`` periods).

    django-q2 adds a month by clamping the day to a shorter month's last, and keeps the
    clamped day: a row on the 31st runs on the 28th from the first February on. The day it
    settles on is the expression's; the runs before then are said in a note.
    """
    runs = [row.next_run]
    for _ in range(PERIODS[row.schedule_type]):
        runs.append(row.calculate_next_run(runs[-1]))
    local = [run.astimezone(ZoneInfo(zone)) for run in runs]
    last, year = local[-1], local[-PER_YEAR[row.schedule_type] :]
    months = (
        "*" if row.schedule_type == "M" else ",".join(map(str, sorted({t.month for t in year})))
    )
    cron = f"{last.minute} {last.hour} {last.day} {months} *"
    agree = _agreeing(Schedule(cron, zone), runs)
    if agree > len(runs) // 2:
        shown = ", ".join(f"{t:%Y-%m-%d %H:%M}" for t in local[:4])
        raise NotMappable(
            f"django-q2 runs it at {shown}, ... in {zone}, which no cron expression says: "
            "add it by hand"
        )
    entry = {"schedule": cron, **where}
    if agree == 0:
        return entry, ()
    before = ", ".join(f"{t:%Y-%m-%d}" for t in local[:agree])
    return entry, (
        f"django-q2 runs it on {before}, then on day {last.day} from {local[agree]:%Y-%m-%d} "
        f"on (a shorter month lowers its day for good): here it runs on day {last.day} from "
        "the start",
    )


def _agreeing(schedule: Schedule, runs: list[datetime]) -> int:
    """The index of the first of ``runs`` from which ``schedule`` ticks at them and only at
    them, to the last; ``len(runs)`` when it does at none."""
    for index in range(len(runs)):
        ticks, tick = [], schedule.next_tick(runs[index] - MICROSECOND)
        while tick <= runs[-1]:
            ticks.append(tick)
            tick = schedule.next_tick(tick)
        if ticks == runs[index:]:
            return index
    return len(runs)
