"""The rules a job's schedule options follow together, as a decorator, the system checks and
a stored definition apply them: one kind of schedule, a zone only where it applies, a cron
expression that fires, a jitter shorter than the ticks' spacing. Pure: each says why, in one
line, or raises ``ValueError`` with that line."""

from __future__ import annotations

import math
from datetime import timedelta

from ..exceptions import InvalidSchedule
from .jitter import jitter_problem
from .schedule import Every, NeverFires, Schedule


def seconds_of(value: object) -> float | None:
    """``value``, seconds or a ``timedelta``, as float seconds (``None``: neither)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def jitter_seconds(jitter: object, schedule: Schedule | None) -> float | None:
    """``jitter`` (seconds or a ``timedelta``) as the seconds a job holds. Raises
    ``ValueError``, in one line, for what is no duration from 0 up to below the shortest
    interval between the ticks of ``schedule``."""
    if jitter is None:
        return None
    seconds = seconds_of(jitter)
    if seconds is None:
        raise ValueError(f"jitter must be seconds or a timedelta, not {jitter!r}")
    if not 0 <= seconds < math.inf:  # also refuses NaN
        raise ValueError(f"jitter must be a finite number of seconds from 0, not {jitter!r}")
    problem = jitter_problem(seconds, schedule)
    if problem:
        raise ValueError(problem)
    return seconds or None


def spread_over(
    cron: str | None, interval: timedelta | None, zone: str | None, jitter: object
) -> Schedule | None:
    """The schedule a declared ``jitter`` is checked against (``None``: no jitter, or a bad
    cron expression, which the system checks name)."""
    if jitter is None:
        return None
    if interval is not None:
        return Every(interval)
    try:
        return None if cron is None else Schedule(cron, zone=zone)
    except InvalidSchedule:
        return None


def timezone_problem(
    zone: object, *, cron: str | None, every: object, at: object = None
) -> str | None:
    """Why a job with this schedule can have no ``timezone``, or ``None`` (the zone's name is
    [zone_problem][django_advisory_cron.core.schedule.zone_problem]'s business)."""
    if zone is None:
        return None
    if every is not None:
        return (
            "timezone cannot be combined with every=: an interval schedule ticks on the "
            "epoch's grid, the same in every zone"
        )
    if cron is None and not at:
        return "timezone needs a cron schedule= (or a moment at=) to apply to"
    return None


def never_fires_problem(cron: str | None) -> str | None:
    """Why the valid cron expression ``cron`` can have no tick (30 February), or ``None``
    (also for an expression that is not valid: that is system check ``E005``'s business)."""
    if cron is None:
        return None
    try:
        Schedule(cron)
    except NeverFires as error:
        return str(error)
    except InvalidSchedule:
        return None
    return None


#: Why a job cannot have a moment (``at=``) besides a cron expression or an interval.
ONE_KIND = (
    "a schedule has one of a cron expression (schedule=), an interval (every=) or a moment "
    "(at=), not more"
)


def both_problem(schedule: str, every: object) -> str:
    """Why a job cannot have both a cron ``schedule`` and an ``every`` interval."""
    return (
        f"schedule={schedule!r} and every={every!r} are mutually exclusive: a job has either "
        "a cron expression or an interval"
    )


def max_runs_ended(limit: int | None, runs: int) -> str:
    """Why a schedule with ``max_runs=limit`` that had ``runs`` runs of its ticks is done, or
    ``""``. The runs are counted from the history, not kept in a counter (see
    [runs_of][django_advisory_cron.run.history.runs_of])."""
    if limit is None or runs < limit:
        return ""
    return f"after its max_runs={limit} runs"
