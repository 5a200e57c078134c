"""``--from django-q2``: its ``Schedule`` rows, read through its models. A row calls a
registered job's function (by its dotted path) or ``call_command`` with the command's name
first. A Cron row keeps its expression; Minutes becomes an interval; Hourly, Daily, Weekly,
Monthly, Quarterly and Yearly become the cron expression that fires at the row's next run
and every period after, in ``TIME_ZONE``, as django-q2 reads them. Once, Biweekly and
Bimonthly rows, and rows that repeat a set number of times, are reported."""

from __future__ import annotations

import ast
from collections import Counter
from functools import partial
from typing import Any

from django.apps import apps
from django.utils import timezone

from ...jobs.declared import CALL_COMMAND
from . import Found, NotMappable, Unavailable, described, mapped

#: The ``func`` of the rows ``sync_schedules`` writes for this library's own jobs.
SYNCED = "django_advisory_cron.contrib.django_q.run_scheduled"


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


def _entry(row: Any) -> dict[str, Any]:
    if row.func == SYNCED:
        raise NotMappable(
            "sync_schedules wrote it for a job already defined here: cronworker runs that "
            "job; delete the row once django-q2 no longer schedules it"
        )
    if row.repeats is not None and row.repeats >= 0:
        raise NotMappable(
            f"it runs {row.repeats} more times and stops: add it by hand with an end (--ends)"
        )
    args, kwargs = _arguments(row)
    kwargs.pop("q_options", None)
    target: dict[str, Any] = {"job": row.func}
    if row.func == CALL_COMMAND:
        if not args or not isinstance(args[0], str):
            raise NotMappable(f"it calls {CALL_COMMAND} without a command's name first")
        target = {"command": args[0]}
        args = args[1:]
    return {
        "name": _name(row),
        **target,
        "args": args,
        "kwargs": kwargs,
        **_timing(row),
        "description": described(f"imported from django-q2's schedule {_name(row)!r}"),
    }


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


def _timing(row: Any) -> dict[str, Any]:
    kind = row.schedule_type
    if kind == "C":
        return {"schedule": row.cron}
    if kind == "I":
        return {"every": (row.minutes or 1) * 60}
    if kind in ("O", "BW", "BM"):
        label = {"O": "once", "BW": "every two weeks", "BM": "every two months"}[kind]
        raise NotMappable(
            f"it runs {label}, which no cron expression says: add it by hand with a cron "
            "expression (a weekly or monthly one, checking the week in the job) or "
            "'cronjob trigger' it"
        )
    at = timezone.localtime(row.next_run)
    day_of_week = (at.weekday() + 1) % 7
    quarters = ",".join(map(str, sorted((at.month - 1 + 3 * n) % 12 + 1 for n in range(4))))
    fields = {
        "H": f"{at.minute} * * * *",
        "D": f"{at.minute} {at.hour} * * *",
        "W": f"{at.minute} {at.hour} * * {day_of_week}",
        "M": f"{at.minute} {at.hour} {at.day} * *",
        "Q": f"{at.minute} {at.hour} {at.day} {quarters} *",
        "Y": f"{at.minute} {at.hour} {at.day} {at.month} *",
    }
    if kind not in fields:
        raise NotMappable(f"its schedule type {kind!r} is not known here")
    return {"schedule": fields[kind]}
